// Scheduler: iteration-level continuous batching over a paged KV cache (vLLM's scheduler).
//
// Each step (Schedule()) picks, within a token budget (max_num_batched_tokens) and a sequence
// limit (max_num_seqs):
//   1. one decode token for every running sequence whose prompt is computed, oldest first;
//   2. then the next prefill chunk of running sequences whose prompt is partly computed;
//   3. then, if nothing was preempted this step, waiting sequences in arrival order (FCFS), each
//      starting with the full blocks of its tokens found in the prefix cache (not recomputed),
//      as long as their first chunk's blocks are available.
// Decodes come first, so a long prompt never stalls generation: it is split into chunks across
// steps (chunked prefill; without it a waiting prompt runs whole, alone if it exceeds the budget).
// When a running sequence needs a block and the pool has none, the newest running sequence not
// yet scheduled this step is preempted: its blocks are freed and it goes back to the front of the
// waiting queue, to be recomputed (prompt and generated tokens, with prefix-cache hits) later. A
// sequence that fits the pool alone therefore always completes.
//
// The scheduler knows no model and no sampling: after the step ran, CompleteStep() records what
// was computed, and the caller appends each sampled token to Sequence::tokens and Remove()s
// finished sequences (freeing their blocks at once). Not thread-safe: the engine's step thread
// owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "generation/block_manager.h"
#include "generation/model_runner.h"

namespace inferd::gen {

struct SchedulerOptions {
  int max_num_seqs = 64;             // running sequences at most
  int max_num_batched_tokens = 512;  // tokens computed per step at most
  bool enable_prefix_caching = true;
  bool chunked_prefill = true;
};

struct Sequence {
  enum class State { kWaiting, kRunning };
  int64_t id = 0;
  std::vector<int32_t> tokens;  // the prompt, then the generated tokens
  int prompt_len = 0;
  int64_t num_computed = 0;       // leading tokens whose K/V is in the cache
  int cached_prompt_tokens = -1;  // prompt tokens found in the prefix cache at first admission
  int num_preemptions = 0;
  int64_t draft_computed = 0;     // leading tokens whose K/V is in the draft model's pool
  State state = State::kWaiting;
  bool scheduled = false;  // within Schedule(): has a chunk this step
};

struct ScheduledChunk {
  Sequence* seq;
  int64_t start;  // == seq->num_computed when scheduled
  int num_tokens;
  bool need_logits;  // the chunk ends at the sequence's last token: sample after it
};

struct ScheduleResult {
  std::vector<ScheduledChunk> chunks;  // decodes first, then prefill chunks
  int num_preempted = 0;
  int64_t num_tokens = 0;
};

class Scheduler {
 public:
  Scheduler(const SchedulerOptions& options, int num_blocks, int block_size);

  // Queues a new sequence (tokens = its prompt, non-empty; id unique) at the back.
  void Add(std::unique_ptr<Sequence> seq);
  // Plans the next step (see the header comment). Empty when there is nothing to run.
  ScheduleResult Schedule();
  // The runner's view of `result` (spans into the sequences and block tables: valid until the
  // next Schedule(), CompleteStep() or Remove()).
  std::vector<SequenceChunk> RunnerChunks(const ScheduleResult& result) const;
  // After the step ran: advances num_computed and registers newly full blocks in the prefix cache.
  void CompleteStep(const ScheduleResult& result);
  // Speculative decoding (engine.cc). After Schedule(): grows a scheduled decode's blocks to
  // `num_tokens` (its tokens plus the draft tokens its verification chunk will write) from free
  // blocks only, never preempting; false (nothing changed) when the pool is short.
  bool ReserveLookahead(Sequence* seq, int64_t num_tokens);
  // After CompleteStep() and after the verified tokens were appended to seq->tokens: the first
  // `num_accepted` draft tokens of the verification chunk are computed too; the K/V of the
  // rejected ones is dropped (num_computed excludes it, their blocks beyond seq->tokens go back
  // to the pool; the slots left in kept blocks are overwritten by the next step).
  void AcceptSpeculated(Sequence* seq, int num_accepted);
  // Removes a sequence (finished, cancelled or failed) and frees its blocks; nullptr if unknown.
  std::unique_ptr<Sequence> Remove(int64_t id);

  Sequence* Find(int64_t id) const;
  bool HasWork() const { return !running_.empty() || !waiting_.empty(); }
  int num_running() const { return static_cast<int>(running_.size()); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  int64_t num_preemptions() const { return preemptions_; }
  const BlockManager& blocks() const { return blocks_; }

 private:
  // Grows `seq`'s blocks to `num_tokens`, preempting newer unscheduled sequences as needed;
  // false when `seq` itself had to be preempted.
  bool GrowOrPreempt(Sequence* seq, int64_t num_tokens, ScheduleResult* result);
  void Preempt(Sequence* seq, ScheduleResult* result);
  void ScheduleRunning(bool decodes, int64_t* budget, ScheduleResult* result);
  void AdmitWaiting(int64_t* budget, ScheduleResult* result);
  void AddChunk(Sequence* seq, int64_t n, int64_t* budget, ScheduleResult* result);

  const SchedulerOptions options_;
  BlockManager blocks_;
  std::unordered_map<int64_t, std::unique_ptr<Sequence>> seqs_;
  std::deque<Sequence*> waiting_;
  std::list<Sequence*> running_;  // in admission order: the back is the newest
  int64_t preemptions_ = 0;
};

}  // namespace inferd::gen
