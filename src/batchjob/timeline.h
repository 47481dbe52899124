// A picture of a job's stages over time: one lane per stage thread (reader 0..n, engine worker,
// writer), one rectangle per span (an item read, a batch run, a flush), as a standalone SVG.
//
// The SVG is written by hand: it is a few hundred static <rect>s with <title> tooltips on a time
// axis, which needs no chart library (Debian has none for C++ that writes plain SVG).
//
// Thread-safe: stages add spans from their own threads. At most `max_spans` are kept (the first
// ones; the picture says how many were left out) so a million-item job draws a bounded file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"

namespace inferd::batchjob {

struct TimelineSpan {
  std::string lane;   // "reader 0", "engine", "writer"
  double start_s = 0; // seconds since the timeline's origin
  double end_s = 0;
  std::string label;  // tooltip
};

class Timeline {
 public:
  explicit Timeline(Clock::TimePoint origin, size_t max_spans = 20000)
      : origin_(origin), max_spans_(max_spans) {}
  void Add(const std::string& lane, Clock::TimePoint start, Clock::TimePoint end,
           std::string label) EXCLUDES(mu_);
  std::vector<TimelineSpan> Spans() const EXCLUDES(mu_);
  // The SVG document: lanes grouped by their first word in pipeline order (reader, engine,
  // writer, then others), numbered lanes in numeric order.
  std::string RenderSvg(const std::string& title) const EXCLUDES(mu_);

 private:
  Clock::TimePoint origin_;
  size_t max_spans_;
  mutable Mutex mu_;
  std::vector<TimelineSpan> spans_ GUARDED_BY(mu_);
  int64_t dropped_ GUARDED_BY(mu_) = 0;
};

// Renders `spans` (pure; RenderSvg's body). `dropped`: spans left out, said in the caption.
std::string RenderTimelineSvg(const std::vector<TimelineSpan>& spans, const std::string& title,
                              int64_t dropped);

// Writes `text` to `path`.
Status WriteTextFile(const std::string& path, const std::string& text);

}  // namespace inferd::batchjob
