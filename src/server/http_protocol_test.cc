#include "server/http_protocol.h"

#include <gtest/gtest.h>

#include <boost/asio/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>

#include "server/json_text.h"

namespace inferd::server {
namespace {

namespace http = boost::beast::http;

int StatusOf(http::error e, bool line_parsed = true) {
  auto err = ClassifyReadError(http::make_error_code(e), line_parsed, HttpProtocolLimits{});
  return err ? err->status : 0;
}

TEST(HttpProtocol, ParseErrorsMapToStatusCodes) {
  EXPECT_EQ(StatusOf(http::error::header_limit, /*line_parsed=*/true), 431);
  EXPECT_EQ(StatusOf(http::error::header_limit, /*line_parsed=*/false), 414);
  EXPECT_EQ(StatusOf(http::error::bad_content_length), 400);
  EXPECT_EQ(StatusOf(http::error::bad_transfer_encoding), 400);
  EXPECT_EQ(StatusOf(http::error::bad_value), 400);        // NUL in a field
  EXPECT_EQ(StatusOf(http::error::bad_line_ending), 400);  // bare LF
  EXPECT_EQ(StatusOf(http::error::bad_chunk), 400);
  EXPECT_EQ(StatusOf(http::error::body_limit), 413);
  // Not the request's fault: no reply.
  EXPECT_EQ(StatusOf(http::error::end_of_stream), 0);
  EXPECT_EQ(StatusOf(http::error::partial_message), 0);
  EXPECT_FALSE(ClassifyReadError(boost::beast::error::timeout, true, {}).has_value());
  EXPECT_FALSE(ClassifyReadError(boost::asio::error::connection_reset, true, {}).has_value());
  EXPECT_FALSE(ClassifyReadError({}, true, {}).has_value());
}

std::optional<HttpProtocolError> Check(http::request_header<>& h, HttpProtocolLimits limits = {}) {
  return CheckRequestHead(h, limits);
}

TEST(HttpProtocol, RequestHeadChecks) {
  http::request_header<> h;
  h.method(http::verb::post);
  h.target("/v2/models/m/infer");
  h.insert(http::field::content_length, "2");
  EXPECT_FALSE(Check(h).has_value());
  h.insert(http::field::content_length, "2");  // equal duplicate: Beast accepts it, we do not
  EXPECT_EQ(Check(h)->status, 400);
  h.erase(http::field::content_length);
  h.insert(http::field::content_length, "2, 2");
  EXPECT_EQ(Check(h)->status, 400);
  h.erase(http::field::content_length);
  h.insert(http::field::transfer_encoding, "chunked");
  EXPECT_FALSE(Check(h).has_value());
  h.set(http::field::transfer_encoding, "gzip");
  EXPECT_EQ(Check(h)->status, 400);
  h.set(http::field::transfer_encoding, "gzip, chunked");
  EXPECT_EQ(Check(h)->status, 501);
  h.erase(http::field::transfer_encoding);
  HttpProtocolLimits small;
  small.max_uri_bytes = 8;
  EXPECT_EQ(Check(h, small)->status, 414);
  small = {};
  small.max_header_count = 3;
  for (int i = 0; i < 4; ++i) h.insert("x-" + std::to_string(i), "v");
  EXPECT_EQ(Check(h, small)->status, 431);
}

TEST(HttpProtocol, PercentDecode) {
  EXPECT_EQ(*PercentDecode("m%C3%B6del"), "m\xC3\xB6" "del");
  EXPECT_EQ(*PercentDecode("a%2fb+c"), "a/b+c");  // a segment: %2F stays inside it
  EXPECT_EQ(*PercentDecode("plain"), "plain");
  EXPECT_EQ(*PercentDecode(""), "");
  for (const char* bad : {"%", "%4", "a%G1", "%%", "x%00y"}) {
    EXPECT_EQ(PercentDecode(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(HttpProtocol, ByteBudgetAndLeases) {
  auto budget = std::make_shared<ByteBudget>(100);
  {
    ByteLease a(budget), b(budget);
    EXPECT_TRUE(a.Resize(60));
    EXPECT_FALSE(b.Resize(41));  // would exceed: nothing taken
    EXPECT_EQ(budget->in_use(), 60u);
    EXPECT_TRUE(b.Resize(40));
    EXPECT_FALSE(a.Grow(1));
    EXPECT_TRUE(a.Resize(10));  // shrink releases
    EXPECT_EQ(budget->in_use(), 50u);
    ByteLease c = std::move(a);  // moves the claim
    EXPECT_EQ(a.held(), 0u);
    EXPECT_EQ(c.held(), 10u);
    EXPECT_EQ(budget->in_use(), 50u);
  }
  EXPECT_EQ(budget->in_use(), 0u);
  EXPECT_FALSE(budget->TryAcquire(SIZE_MAX));  // no overflow
  ByteLease none;
  EXPECT_TRUE(none.Resize(1u << 30));  // no budget: unlimited
}

TEST(JsonText, Utf8Validation) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("ascii \x01"));
  EXPECT_TRUE(IsValidUtf8("m\xC3\xB6" "del \xE2\x82\xAC \xF0\x9F\x98\x80"));
  for (const char* bad : {"\xff", "\xC3", "\xC0\xAF", "\xE0\x80\xAF", "\xED\xA0\x80",
                          "\xF4\x90\x80\x80", "\xF8\x88\x80\x80\x80", "a\x80"}) {
    EXPECT_FALSE(IsValidUtf8(bad)) << bad;
  }
  EXPECT_EQ(ToValidUtf8("ok"), "ok");
  EXPECT_EQ(ToValidUtf8("a\xffz"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(ToValidUtf8("\xC3("), "\xEF\xBF\xBD(");
  EXPECT_TRUE(IsValidUtf8(ToValidUtf8("\xED\xA0\x80\xF4\x90")));
}

TEST(JsonText, RedactRepositoryPath) {
  const std::vector<std::string> roots = {"/srv/models/", "/real/models", "models"};
  EXPECT_EQ(RedactRepositoryPath("/srv/models/m/1/model.onnx: bad", roots), "m/1/model.onnx: bad");
  EXPECT_EQ(RedactRepositoryPath("cannot read '/real/models'", roots),
            "cannot read '<model repository>'");
  EXPECT_EQ(RedactRepositoryPath("/srv/models-old/x and /srv/modelsx", roots),
            "/srv/models-old/x and /srv/modelsx");  // other paths
  // Relative spellings are left alone (they tell nothing, and "models" is a common word).
  EXPECT_EQ(RedactRepositoryPath("no models/m here", roots), "no models/m here");
}

}  // namespace
}  // namespace inferd::server
