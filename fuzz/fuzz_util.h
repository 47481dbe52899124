// Helpers shared by the fuzz targets (fuzz/*_fuzz.cc; docs/hardening.md).
//
// A target's contract is the one of the code it feeds: any input either decodes or comes back as
// a Status / error object, never a crash, a sanitizer report or an unbounded allocation; and
// what the server would write back (JSON) is always valid JSON. FUZZ_CHECK turns a broken
// contract into an abort, which libFuzzer (and the replay driver, replay_main.cc) report as a
// crash with the input saved.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <rapidjson/document.h>

#define FUZZ_CHECK(cond, what)                                                \
  do {                                                                        \
    if (!(cond)) {                                                            \
      std::fprintf(stderr, "fuzz check failed: %s (%s:%d)\n", what, __FILE__, \
                   __LINE__);                                                 \
      std::abort();                                                           \
    }                                                                         \
  } while (0)

namespace inferd::fuzz {

// True when `text` is one JSON document (RFC 8259: no NaN/Infinity literals). UTF-8 is checked
// too: a response echoing raw bytes of a request would be invalid JSON for every strict client.
inline bool IsValidJson(std::string_view text) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseValidateEncodingFlag>(text.data(), text.size());
  return !doc.HasParseError();
}

}  // namespace inferd::fuzz
