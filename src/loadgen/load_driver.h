// Load drivers for the server load generator.
//
// Closed loop (ClosedLoop): `concurrency` requests are always outstanding; each completion sends
// the next one at once. Latency is send -> response.
//
// Open loop (OpenLoop): requests are intended at times from an ArrivalSchedule, whatever the
// server does. Latency is measured from the *intended* send time, so when the server (or the
// client's connection pool) falls behind, the waiting is charged to the request instead of being
// hidden by sending later (no coordinated omission).
//
// Completions are recorded in a Recorder, which the measurement loop drains once per window.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "loadgen/client.h"
#include "loadgen/latency_stats.h"

namespace inferd::loadgen {

// Thread-safe sink of completed requests.
class Recorder {
 public:
  struct Window {
    std::vector<int64_t> latencies_us;      // successful requests
    std::map<std::string, int64_t> errors;  // error kind -> count
  };
  void Add(std::chrono::nanoseconds latency, std::string_view error) EXCLUDES(mu_);
  // Everything recorded since the last Take.
  Window Take() EXCLUDES(mu_);

 private:
  Mutex mu_;
  Window current_ GUARDED_BY(mu_);
};

class LoadDriver {
 public:
  virtual ~LoadDriver() = default;
  // Stops sending and waits up to `drain` for outstanding requests. Idempotent. The destructor
  // calls Stop with the request timeout.
  virtual void Stop(std::chrono::milliseconds drain) = 0;
  virtual int64_t outstanding() const = 0;
};

// Both start sending at once. `client` and `recorder` must outlive the driver.
std::unique_ptr<LoadDriver> StartClosedLoop(InferenceClient& client,
                                            std::shared_ptr<Recorder> recorder, int concurrency);
std::unique_ptr<LoadDriver> StartOpenLoop(InferenceClient& client,
                                          std::shared_ptr<Recorder> recorder, double rate_per_s,
                                          ArrivalSchedule::Distribution distribution,
                                          uint64_t seed);

}  // namespace inferd::loadgen
