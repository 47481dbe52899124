// Progress of a batch job on stderr: a bar redrawn in place on a terminal, plain lines at an
// interval otherwise (logs, CI), and the summary at the end. Time comes from the injected Clock,
// so the formatting is tested on a FakeClock.
//
//   terminal:  [##########..........]  512/1000  51%  38.2 items/s  ETA 0:12  2 errors
//   plain:     progress: 512/1000 (51%), 38.2 items/s, ETA 0:12, 2 errors
//
// Counts include the items a resumed job found done; the rate counts only this run's items.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

#include "common/clock.h"

namespace inferd::batchjob {

struct ProgressState {
  int64_t done = 0;     // inputs with a record (including those done before a resume)
  int64_t total = 0;    // inputs of the job
  int64_t errors = 0;   // error records written by this run
  int64_t run_done = 0; // records written by this run
  double elapsed_s = 0; // since this run started
};

// "1:05:09", "0:12"; "?" for a negative or non-finite duration.
std::string FormatDuration(double seconds);
// Items per second of this run; 0 before any time has passed.
double Rate(const ProgressState& s);
std::string FormatBar(const ProgressState& s, int width);
std::string FormatPlainLine(const ProgressState& s);

class Progress {
 public:
  // `tty`: draw the bar (redrawn at most every 100 ms); else a plain line every `interval`.
  Progress(Clock& clock, std::ostream& out, bool tty, int64_t total, int64_t already_done,
           std::chrono::milliseconds interval = std::chrono::seconds(5));
  // Called by the writer after each flush and on its periodic wake-ups: prints if due.
  void Update(int64_t run_done, int64_t errors);
  // The final line (the bar finishes with a newline; plain mode prints a last line).
  void Finish(int64_t run_done, int64_t errors);
  double ElapsedSeconds() const;

 private:
  ProgressState State(int64_t run_done, int64_t errors) const;
  void Print(const ProgressState& s);

  Clock& clock_;
  std::ostream& out_;
  bool tty_;
  int64_t total_, already_done_;
  std::chrono::milliseconds interval_;
  Clock::TimePoint start_, last_print_;
  bool printed_ = false;
};

}  // namespace inferd::batchjob
