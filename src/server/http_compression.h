// HTTP body compression (gzip and deflate, RFC 9110 Content-Encoding / Accept-Encoding) on zlib.
//
// Request side: a body sent with `Content-Encoding: gzip` or `deflate` is inflated before any
// handler sees it, bounded by a limit on the inflated size (so a small "zip bomb" cannot make the
// server allocate more than the request-size limit it already enforces on plain bodies).
// Response side: the encoding a client accepts is chosen once per request and the reply body is
// compressed with it (http_server.cc; streamed replies are never compressed).
//
// "deflate" is the zlib format (RFC 1950), as every client library sends it; a raw deflate stream
// (RFC 1951, what some old clients send) is accepted on input too. Pure functions, unit-tested.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace inferd::server {

enum class HttpEncoding { kIdentity, kGzip, kDeflate };

// The Content-Encoding header value for `e` ("identity", "gzip", "deflate").
const char* HttpEncodingName(HttpEncoding e);

// Parses a Content-Encoding value: "gzip" / "x-gzip", "deflate", "identity" or empty (case and
// surrounding whitespace ignored). Anything else (including a list of several codings) is
// UNIMPLEMENTED naming the value.
StatusOr<HttpEncoding> ParseContentEncoding(std::string_view value);

// Picks the reply encoding from an Accept-Encoding value: gzip or deflate when listed with a
// non-zero q (gzip first on a tie; `*` means gzip), else identity.
HttpEncoding ChooseResponseEncoding(std::string_view accept_encoding);

// Inflates `data`. RESOURCE_EXHAUSTED when the inflated size would exceed `max_bytes` (checked
// while inflating, never allocating more than max_bytes plus one chunk); INVALID_ARGUMENT for a
// corrupt or truncated stream, or trailing bytes after it. kIdentity returns `data` as is.
StatusOr<std::string> Decompress(HttpEncoding encoding, std::string_view data, size_t max_bytes);

// Compresses `data` (zlib's default level). INTERNAL only if zlib itself fails.
StatusOr<std::string> Compress(HttpEncoding encoding, std::string_view data);

}  // namespace inferd::server
