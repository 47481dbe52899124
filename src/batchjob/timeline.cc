#include "batchjob/timeline.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <cstdlib>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace inferd::batchjob {
namespace {

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::string LaneKind(const std::string& lane) { return lane.substr(0, lane.find(' ')); }

// Two shades per stage, alternating span by span, so back-to-back batches stay apart.
const char* LaneColor(const std::string& kind, size_t nth) {
  bool odd = nth % 2 == 1;
  if (kind == "reader") return odd ? "#7ea6cf" : "#4e79a7";
  if (kind == "engine") return odd ? "#f28e8c" : "#e15759";
  if (kind == "writer") return odd ? "#8cd17d" : "#59a14f";
  return odd ? "#c9a58f" : "#9c755f";
}

// Stages in pipeline order (reader, engine, writer, then any other), lanes within a stage by
// their number ("reader 2" before "reader 10").
std::vector<std::string> OrderLanes(const std::vector<TimelineSpan>& spans) {
  std::vector<std::string> lanes;
  for (const auto& s : spans) {
    if (std::find(lanes.begin(), lanes.end(), s.lane) == lanes.end()) lanes.push_back(s.lane);
  }
  auto rank = [](const std::string& lane) {
    std::string kind = LaneKind(lane);
    int stage = kind == "reader" ? 0 : kind == "engine" ? 1 : kind == "writer" ? 2 : 3;
    size_t space = lane.find(' ');
    long number = space == std::string::npos ? 0 : std::strtol(lane.c_str() + space + 1, nullptr, 10);
    return std::make_tuple(stage, kind, number, lane);
  };
  std::sort(lanes.begin(), lanes.end(),
            [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
  return lanes;
}

// A tick step of 1, 2 or 5 × 10^k seconds giving about 10 ticks over `span` seconds.
double TickStep(double span) {
  double raw = std::max(span, 1e-6) / 10;
  double base = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * base >= raw) return m * base;
  }
  return 10 * base;
}

}  // namespace

void Timeline::Add(const std::string& lane, Clock::TimePoint start, Clock::TimePoint end,
                   std::string label) {
  TimelineSpan s;
  s.lane = lane;
  s.start_s = std::chrono::duration<double>(start - origin_).count();
  s.end_s = std::chrono::duration<double>(end - origin_).count();
  s.label = std::move(label);
  MutexLock l(&mu_);
  if (spans_.size() >= max_spans_) {
    ++dropped_;
    return;
  }
  spans_.push_back(std::move(s));
}

std::vector<TimelineSpan> Timeline::Spans() const {
  MutexLock l(&mu_);
  return spans_;
}

std::string Timeline::RenderSvg(const std::string& title) const {
  MutexLock l(&mu_);
  return RenderTimelineSvg(spans_, title, dropped_);
}

std::string RenderTimelineSvg(const std::vector<TimelineSpan>& spans, const std::string& title,
                              int64_t dropped) {
  const int kLeft = 110, kPlot = 1000, kLane = 22, kTop = 40;
  std::vector<std::string> lanes = OrderLanes(spans);
  double t_end = 0;
  for (const auto& s : spans) t_end = std::max(t_end, s.end_s);
  if (t_end <= 0) t_end = 1;
  auto x = [&](double t) { return kLeft + kPlot * std::clamp(t / t_end, 0.0, 1.0); };
  int height = kTop + kLane * static_cast<int>(lanes.size()) + 50;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n<text x=\"{}\" y=\"20\" font-size=\"14\">{}</text>\n",
      kLeft + kPlot + 20, height, kLeft, XmlEscape(title));
  std::map<std::string, int> row;
  for (size_t i = 0; i < lanes.size(); ++i) {
    row[lanes[i]] = static_cast<int>(i);
    int y = kTop + kLane * static_cast<int>(i);
    svg += fmt::format("<text x=\"5\" y=\"{}\">{}</text>\n", y + 15, XmlEscape(lanes[i]));
    svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f3f3f3\"/>\n",
                       kLeft, y, kPlot, kLane - 2);
  }
  std::map<std::string, size_t> nth;  // spans drawn so far per lane
  for (const auto& s : spans) {
    int y = kTop + kLane * row[s.lane];
    size_t k = nth[s.lane]++;
    double x0 = x(s.start_s), w = std::max(0.5, x(s.end_s) - x0);
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\" "
        "stroke=\"white\" stroke-width=\"0.3\"><title>{} {:.3f}-{:.3f} s</title></rect>\n",
        x0, y + 1, w, kLane - 4, LaneColor(LaneKind(s.lane), k), XmlEscape(s.label), s.start_s,
        s.end_s);
  }
  int axis_y = kTop + kLane * static_cast<int>(lanes.size()) + 5;
  double step = TickStep(t_end);
  for (int i = 0; i * step <= t_end * (1 + 1e-9); ++i) {
    double t = i * step;
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" "
                       "stroke=\"#999\"/><text x=\"{0:.1f}\" y=\"{3}\" "
                       "text-anchor=\"middle\">{4:g} s</text>\n",
                       x(t), axis_y, axis_y + 5, axis_y + 18, t);
  }
  if (dropped > 0) {
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{} later spans not drawn</text>\n", kLeft,
                       axis_y + 36, dropped);
  }
  svg += "</svg>\n";
  return svg;
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return InvalidArgument("cannot write {}", path);
  return Status::Ok();
}

}  // namespace inferd::batchjob
