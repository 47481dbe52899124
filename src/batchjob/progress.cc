#include "batchjob/progress.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace inferd::batchjob {

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  auto s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

double Rate(const ProgressState& s) {
  return s.elapsed_s > 0 ? static_cast<double>(s.run_done) / s.elapsed_s : 0.0;
}

namespace {

std::string EtaText(const ProgressState& s) {
  double rate = Rate(s);
  if (s.done >= s.total) return "0:00";
  if (rate <= 0) return "?";
  return FormatDuration(static_cast<double>(s.total - s.done) / rate);
}

int Percent(const ProgressState& s) {
  return s.total > 0 ? static_cast<int>(100 * s.done / s.total) : 100;
}

std::string ErrorsText(const ProgressState& s) {
  if (s.errors == 0) return "";
  return fmt::format(", {} error{}", s.errors, s.errors == 1 ? "" : "s");
}

}  // namespace

std::string FormatBar(const ProgressState& s, int width) {
  width = std::max(width, 1);
  int64_t filled = s.total > 0 ? std::min<int64_t>(width, width * s.done / s.total) : width;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(width - filled), '.');
  return fmt::format("[{}] {}/{} {}% {:.1f} items/s ETA {}{}", bar, s.done, s.total, Percent(s),
                     Rate(s), EtaText(s), ErrorsText(s));
}

std::string FormatPlainLine(const ProgressState& s) {
  return fmt::format("progress: {}/{} ({}%), {:.1f} items/s, ETA {}{}", s.done, s.total,
                     Percent(s), Rate(s), EtaText(s), ErrorsText(s));
}

Progress::Progress(Clock& clock, std::ostream& out, bool tty, int64_t total, int64_t already_done,
                   std::chrono::milliseconds interval)
    : clock_(clock),
      out_(out),
      tty_(tty),
      total_(total),
      already_done_(already_done),
      interval_(interval),
      start_(clock.Now()),
      last_print_(start_) {}

double Progress::ElapsedSeconds() const {
  return std::chrono::duration<double>(clock_.Now() - start_).count();
}

ProgressState Progress::State(int64_t run_done, int64_t errors) const {
  ProgressState s;
  s.done = already_done_ + run_done;
  s.total = total_;
  s.errors = errors;
  s.run_done = run_done;
  s.elapsed_s = ElapsedSeconds();
  return s;
}

void Progress::Print(const ProgressState& s) {
  if (tty_) {
    out_ << "\r" << FormatBar(s, 30) << "\x1b[K" << std::flush;  // \x1b[K: clear to line end
  } else {
    out_ << FormatPlainLine(s) << "\n" << std::flush;
  }
  printed_ = true;
  last_print_ = clock_.Now();
}

void Progress::Update(int64_t run_done, int64_t errors) {
  auto due = tty_ ? std::chrono::milliseconds(100) : interval_;
  if (clock_.Now() - last_print_ < due) return;
  Print(State(run_done, errors));
}

void Progress::Finish(int64_t run_done, int64_t errors) {
  ProgressState s = State(run_done, errors);
  if (tty_) {
    Print(s);
    out_ << "\n" << std::flush;
  } else if (!printed_ || s.run_done > 0) {
    Print(s);
  }
}

}  // namespace inferd::batchjob
