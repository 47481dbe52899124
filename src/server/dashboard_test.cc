#include "server/dashboard.h"

#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "server/dashboard_assets.h"

namespace inferd::server {
namespace {

// Calls `handler` with one request; the handlers under test answer synchronously.
HttpReply Call(const HttpHandler& handler, const std::string& method, const std::string& path) {
  HttpRequest req;
  req.method = method;
  req.path = path;
  req.body = std::make_shared<std::string>();
  std::optional<HttpReply> got;
  handler(std::move(req), [&](HttpReply r) { got = std::move(r); });
  EXPECT_TRUE(got.has_value()) << method << " " << path << " got no reply";
  return got.value_or(HttpReply{});
}

// The dashboard in front of a stand-in metrics handler that echoes the path it was given.
HttpHandler Dashboard() {
  return MakeDashboardHttpHandler([](HttpRequest req, HttpResponder reply) {
    HttpReply r;
    r.content_type = "text/plain";
    r.body = "inner " + req.method + " " + req.path;
    reply(std::move(r));
  });
}

const std::string* Header(const HttpReply& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return &v;
  }
  return nullptr;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Dashboard, ServesThePageAndItsFiles) {
  HttpHandler h = Dashboard();
  for (const char* path : {"/dashboard", "/dashboard/"}) {
    HttpReply r = Call(h, "GET", path);
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
    EXPECT_NE(r.body.find("/dashboard/chart.js"), std::string::npos);
    EXPECT_NE(r.body.find("/dashboard/dashboard.js"), std::string::npos);
    const std::string* csp = Header(r, "Content-Security-Policy");
    ASSERT_NE(csp, nullptr);
    EXPECT_NE(csp->find("default-src 'self'"), std::string::npos);
  }
  HttpReply js = Call(h, "GET", "/dashboard/dashboard.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  EXPECT_NE(js.body.find("fetch('/metrics'"), std::string::npos);
  HttpReply css = Call(h, "GET", "/dashboard/dashboard.css");
  EXPECT_EQ(css.status, 200);
  EXPECT_EQ(css.content_type, "text/css; charset=utf-8");
}

TEST(Dashboard, ChartJsIsTheDebianFileByteForByte) {
  HttpReply r = Call(Dashboard(), "GET", "/dashboard/chart.js");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body.rfind("/*!\n * Chart.js v3.", 0), 0u) << r.body.substr(0, 40);
  const std::string debian = ReadFile("/usr/share/javascript/chart.js/chart.min.js");
  if (!debian.empty()) {
    EXPECT_TRUE(r.body == debian) << "embedded copy differs from the package";
  }
  EXPECT_EQ(DashboardChartJs().size(), r.body.size());
}

TEST(Dashboard, EmbeddedPageMatchesTheSourceFiles) {
  const std::string dir = std::string(INFERD_SOURCE_DIR) + "/src/server/dashboard/";
  EXPECT_TRUE(DashboardIndexHtml() == ReadFile(dir + "index.html"));
  EXPECT_TRUE(DashboardJs() == ReadFile(dir + "dashboard.js"));
  EXPECT_TRUE(DashboardCss() == ReadFile(dir + "dashboard.css"));
}

TEST(Dashboard, UnknownPathsAre404AndOtherMethods405) {
  HttpHandler h = Dashboard();
  for (const char* path : {"/dashboard/nope", "/dashboard//", "/dashboard/chart.js/x",
                           "/dashboard/../metrics", "/dashboard/data"}) {
    HttpReply r = Call(h, "GET", path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(r.content_type, "application/json");
    EXPECT_NE(r.body.find("\"error\""), std::string::npos) << r.body;
  }
  for (const char* method : {"POST", "PUT", "DELETE", "HEAD", "OPTIONS", ""}) {
    HttpReply r = Call(h, method, "/dashboard");
    EXPECT_EQ(r.status, 405) << method;
    const std::string* allow = Header(r, "Allow");
    ASSERT_NE(allow, nullptr);
    EXPECT_EQ(*allow, "GET");
  }
  EXPECT_EQ(Call(h, "POST", "/dashboard/nope").status, 404);
}

TEST(Dashboard, OtherPathsGoToTheMetricsHandler) {
  HttpHandler h = Dashboard();
  EXPECT_EQ(Call(h, "GET", "/metrics").body, "inner GET /metrics");
  EXPECT_EQ(Call(h, "POST", "/metrics").body, "inner POST /metrics");
  // Only the /dashboard segment is ours: a longer first segment is not.
  EXPECT_EQ(Call(h, "GET", "/dashboards").body, "inner GET /dashboards");
  EXPECT_EQ(Call(h, "GET", "/").body, "inner GET /");
}

}  // namespace
}  // namespace inferd::server
