// A scripted TextGenerator for the generation API's tests (openai_http_test.cc): one token per
// byte, events emitted by the test (Emit), every Submit and Cancel recorded.
#pragma once

#include <future>
#include <map>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "server/text_generator.h"

namespace inferd::server {

class FakeTextGenerator : public TextGenerator {
 public:
  static constexpr int32_t kBos = 1;
  explicit FakeTextGenerator(int max_context = 64) : max_context_(max_context) {}

  int max_context() const override { return max_context_; }
  // BOS, then byte + 3 per byte.
  std::vector<int32_t> Encode(std::string_view text) const override {
    std::vector<int32_t> out = {kBos};
    for (unsigned char c : text) out.push_back(c + 3);
    return out;
  }
  std::string TokenText(int32_t token) const override {
    return token >= 3 ? std::string(1, static_cast<char>(token - 3)) : "<s>";
  }
  Status Submit(const std::string& id, std::vector<int32_t> prompt, const GenParams& params,
                std::function<void(const GenEvent&)> on_event) override EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    if (!submit_error_.ok()) return submit_error_;
    ids_.push_back(id);
    prompts_.push_back(std::move(prompt));
    params_.push_back(params);
    callbacks_[id] = std::move(on_event);
    if (submit_seen_) {
      submit_seen_->set_value(id);
      submit_seen_.reset();
    }
    return Status::Ok();
  }
  void Cancel(const std::string& id) override EXCLUDES(mu_) {
    std::promise<std::string> done;
    {
      MutexLock lock(&mu_);
      cancelled_.push_back(id);
      if (!cancel_seen_) return;
      done = std::move(*cancel_seen_);
      cancel_seen_.reset();
    }
    done.set_value(id);
  }
  GenerationMetrics Metrics() const override {
    GenerationMetrics m;
    m.running = 2;
    m.kv_blocks_used = 3;
    m.kv_blocks_total = 12;
    return m;
  }

  // Test side.
  void FailSubmits(Status s) EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    submit_error_ = std::move(s);
  }
  // Delivers `e` to the request `id` (as the engine thread would).
  void Emit(const std::string& id, const GenEvent& e) EXCLUDES(mu_) {
    std::function<void(const GenEvent&)> cb;
    {
      MutexLock lock(&mu_);
      cb = callbacks_.at(id);
    }
    cb(e);
  }
  // Resolves with the id of the next accepted Submit.
  std::future<std::string> NextSubmit() EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    submit_seen_.emplace();
    return submit_seen_->get_future();
  }
  // Resolves with the id of the next Cancel call.
  std::future<std::string> NextCancel() EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    cancel_seen_.emplace();
    return cancel_seen_->get_future();
  }
  std::vector<std::string> ids() const EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return ids_;
  }
  std::vector<std::vector<int32_t>> prompts() const EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return prompts_;
  }
  std::vector<GenParams> params() const EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return params_;
  }
  std::vector<std::string> cancelled() const EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return cancelled_;
  }

 private:
  const int max_context_;
  mutable Mutex mu_;
  Status submit_error_ GUARDED_BY(mu_);
  std::vector<std::string> ids_ GUARDED_BY(mu_);
  std::vector<std::vector<int32_t>> prompts_ GUARDED_BY(mu_);
  std::vector<GenParams> params_ GUARDED_BY(mu_);
  std::map<std::string, std::function<void(const GenEvent&)>> callbacks_ GUARDED_BY(mu_);
  std::vector<std::string> cancelled_ GUARDED_BY(mu_);
  std::optional<std::promise<std::string>> cancel_seen_ GUARDED_BY(mu_);
  std::optional<std::promise<std::string>> submit_seen_ GUARDED_BY(mu_);
};

// An event carrying `text` (one token per byte), optionally the last.
inline GenEvent TextEvent(const std::string& text, const char* finish_reason = nullptr) {
  GenEvent e;
  e.text = text;
  for (unsigned char c : text) e.tokens.push_back(c + 3);
  if (finish_reason != nullptr) {
    e.finished = true;
    e.finish_reason = finish_reason;
    e.prompt_tokens = 5;
    e.completion_tokens = 7;
    e.cached_prompt_tokens = 2;
  }
  return e;
}

}  // namespace inferd::server
