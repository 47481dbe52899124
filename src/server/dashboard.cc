#include "server/dashboard.h"

#include <string>
#include <string_view>
#include <utility>

#include "server/dashboard_assets.h"
#include "server/http_codec.h"

namespace inferd::server {
namespace {

struct Asset {
  std::string_view path;
  std::string_view content_type;
  std::string_view (*body)();
};

constexpr Asset kAssets[] = {
    {"/dashboard", "text/html; charset=utf-8", DashboardIndexHtml},
    {"/dashboard/", "text/html; charset=utf-8", DashboardIndexHtml},
    {"/dashboard/dashboard.js", "text/javascript; charset=utf-8", DashboardJs},
    {"/dashboard/dashboard.css", "text/css; charset=utf-8", DashboardCss},
    {"/dashboard/chart.js", "text/javascript; charset=utf-8", DashboardChartJs},
};

bool IsDashboardPath(std::string_view path) {
  return path == "/dashboard" || path.starts_with("/dashboard/");
}

HttpReply JsonErrorReply(int status, std::string_view message) {
  HttpReply r;
  r.status = status;
  r.body = JsonError(message);
  return r;
}

}  // namespace

HttpHandler MakeDashboardHttpHandler(HttpHandler metrics) {
  return [metrics = std::move(metrics)](HttpRequest req, HttpResponder reply) {
    if (!IsDashboardPath(req.path)) return metrics(std::move(req), std::move(reply));
    const Asset* asset = nullptr;
    for (const Asset& a : kAssets) {
      if (a.path == req.path) asset = &a;
    }
    if (asset == nullptr) return reply(JsonErrorReply(404, "unknown path; try /dashboard"));
    if (req.method != "GET") {
      HttpReply r = JsonErrorReply(405, "use GET " + std::string(asset->path));
      r.headers.emplace_back("Allow", "GET");
      return reply(std::move(r));
    }
    HttpReply r;
    r.content_type = std::string(asset->content_type);
    r.body = std::string(asset->body());
    // 'self' only: the page may load its files and poll /metrics, nothing else (no CDN, no
    // beacon); inline script and style are refused too, so only the embedded files run.
    r.headers.emplace_back("Content-Security-Policy",
                           "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'");
    r.headers.emplace_back("X-Content-Type-Options", "nosniff");
    r.headers.emplace_back("Cache-Control", "no-cache");
    reply(std::move(r));
  };
}

}  // namespace inferd::server
