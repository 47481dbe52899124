#include "loadgen/report.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace inferd::loadgen {

namespace {

double Ms(int64_t us) { return static_cast<double>(us) / 1000.0; }

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Num(double v) { return fmt::format("{:g}", v); }

}  // namespace

std::string PointsToJson(const std::vector<PointResult>& points) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  auto opt = [&](const char* key, double v) {
    w.Key(key);
    if (v < 0) {
      w.Null();
    } else {
      w.Double(v);
    }
  };
  w.StartArray();
  for (const auto& p : points) {
    w.StartObject();
    if (p.mode == PointResult::Mode::kConcurrency) {
      w.Key("concurrency");
      w.Int64(static_cast<int64_t>(p.level));
    } else {
      w.Key("request_rate");
      w.Double(p.level);
    }
    w.Key("throughput");
    w.Double(p.throughput);
    w.Key("requests_per_s");
    w.Double(p.requests_per_s);
    w.Key("requests");
    w.Int64(p.latency.count);
    w.Key("avg_ms");
    w.Double(p.latency.avg_us / 1000.0);
    for (auto [key, us] : {std::pair{"p50_ms", p.latency.p50_us}, {"p90_ms", p.latency.p90_us},
                           {"p95_ms", p.latency.p95_us}, {"p99_ms", p.latency.p99_us},
                           {"max_ms", p.latency.max_us}}) {
      w.Key(key);
      w.Double(Ms(us));
    }
    w.Key("errors");
    w.Int64(p.error_count);
    w.Key("errors_by_kind");
    w.StartObject();
    for (const auto& [kind, n] : p.errors) {
      w.Key(kind.c_str());
      w.Int64(n);
    }
    w.EndObject();
    opt("server_queue_us", p.server_queue_us);
    opt("server_compute_us", p.server_compute_us);
    w.Key("client_cpu_pct");
    w.Double(p.client_cpu_pct);
    opt("server_cpu_pct", p.server_cpu_pct);
    opt("server_rss_mb", p.server_rss_mb);
    w.Key("stable");
    w.Bool(p.stable);
    w.Key("windows");
    w.Int(p.windows);
    w.EndObject();
  }
  w.EndArray();
  return std::string(sb.GetString()) + "\n";
}

std::string PointsToCsv(const std::vector<PointResult>& points) {
  std::string out =
      "mode,level,throughput,requests_per_s,avg_ms,p50_ms,p90_ms,p95_ms,p99_ms,max_ms,errors,"
      "server_queue_us,server_compute_us,client_cpu_pct,server_cpu_pct,server_rss_mb,stable\n";
  auto opt = [](double v) { return v < 0 ? std::string() : fmt::format("{:.1f}", v); };
  for (const auto& p : points) {
    out += fmt::format(
        "{},{},{:.2f},{:.2f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{},{},{},{:.1f},{},{},{}\n",
        p.mode == PointResult::Mode::kConcurrency ? "concurrency" : "request_rate", Num(p.level),
        p.throughput, p.requests_per_s, p.latency.avg_us / 1000.0, Ms(p.latency.p50_us),
        Ms(p.latency.p90_us), Ms(p.latency.p95_us), Ms(p.latency.p99_us), Ms(p.latency.max_us),
        p.error_count, opt(p.server_queue_us), opt(p.server_compute_us), p.client_cpu_pct,
        opt(p.server_cpu_pct), opt(p.server_rss_mb), p.stable ? "true" : "false");
  }
  return out;
}

Status WriteReportFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) return InvalidArgument("cannot write '{}': {}", path, std::strerror(errno));
  f << text;
  f.close();
  if (!f) return Internal("writing '{}' failed", path);
  return Status::Ok();
}

double NiceStep(double max, int target) {
  if (!(max > 0) || target < 1) return 1;
  const double raw = max / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

std::string LatencyThroughputSvg(const std::vector<PointResult>& points, const std::string& title,
                                 const std::string& x_label, const std::string& y_label) {
  constexpr double kW = 720, kH = 440, kLeft = 70, kRight = 150, kTop = 40, kBottom = 50;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  double max_x = 0, max_y = 0;
  for (const auto& p : points) {
    max_x = std::max(max_x, p.throughput);
    max_y = std::max(max_y, Ms(p.latency.p99_us));
  }
  const double sx = NiceStep(max_x * 1.05, 6), sy = NiceStep(max_y * 1.05, 6);
  const double top_x = sx * std::ceil(std::max(max_x * 1.05, sx) / sx);
  const double top_y = sy * std::ceil(std::max(max_y * 1.05, sy) / sy);
  auto X = [&](double v) { return kLeft + v / top_x * pw; };
  auto Y = [&](double v) { return kTop + ph - v / top_y * ph; };

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">{}</text>\n",
      kW, kH, kLeft + pw / 2, XmlEscape(title));
  for (double v = 0; v <= top_x * (1 + 1e-9); v += sx) {
    s += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        X(v), kTop, kTop + ph, kTop + ph + 16, Num(v));
  }
  for (double v = 0; v <= top_y * (1 + 1e-9); v += sy) {
    s += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
        kLeft, Y(v), kLeft + pw, kLeft - 6, Y(v) + 4, Num(v));
  }
  s += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n"
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n"
      "<text transform=\"translate(18 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
      kLeft, kTop, pw, ph, kLeft + pw / 2, kH - 12, XmlEscape(x_label), kTop + ph / 2,
      XmlEscape(y_label));
  struct Series {
    const char* name;
    const char* color;
    int64_t LatencySummary::*field;
  };
  const Series series[] = {{"P50", "#1f77b4", &LatencySummary::p50_us},
                           {"P99", "#d62728", &LatencySummary::p99_us}};
  std::vector<const PointResult*> sorted;
  for (const auto& p : points) sorted.push_back(&p);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto* a, const auto* b) { return a->level < b->level; });
  for (size_t k = 0; k < 2; ++k) {
    const Series& se = series[k];
    std::string pts;
    for (const auto* p : sorted) {
      pts += fmt::format("{:.1f},{:.1f} ", X(p->throughput), Y(Ms(p->latency.*se.field)));
    }
    s += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n",
                     se.color, pts);
    for (const auto* p : sorted) {
      s += fmt::format(
          "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"><title>{} {} {}: {:.2f} ms at "
          "{:.1f}</title></circle>\n",
          X(p->throughput), Y(Ms(p->latency.*se.field)), se.color,
          p->mode == PointResult::Mode::kConcurrency ? "concurrency" : "rate", Num(p->level),
          se.name, Ms(p->latency.*se.field), p->throughput);
    }
    const double ly = kTop + 10 + 20 * static_cast<double>(k);
    s += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\" stroke-width=\"2\"/>"
        "<text x=\"{4}\" y=\"{5}\">{6} latency</text>\n",
        kLeft + pw + 12, ly, kLeft + pw + 36, se.color, kLeft + pw + 42, ly + 4, se.name);
  }
  s += "</svg>\n";
  return s;
}

}  // namespace inferd::loadgen
