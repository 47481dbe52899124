#include "generation/scheduler.h"

#include <algorithm>
#include <cassert>

namespace inferd::gen {

Scheduler::Scheduler(const SchedulerOptions& options, int num_blocks, int block_size)
    : options_(options), blocks_(num_blocks, block_size, options.enable_prefix_caching) {}

void Scheduler::Add(std::unique_ptr<Sequence> seq) {
  assert(!seq->tokens.empty() && !seqs_.contains(seq->id));
  seq->state = Sequence::State::kWaiting;
  waiting_.push_back(seq.get());
  seqs_.emplace(seq->id, std::move(seq));
}

Sequence* Scheduler::Find(int64_t id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

void Scheduler::Preempt(Sequence* seq, ScheduleResult* result) {
  blocks_.Free(seq->id);
  seq->num_computed = 0;
  seq->draft_computed = 0;
  seq->state = Sequence::State::kWaiting;
  ++seq->num_preemptions;
  running_.remove(seq);
  // Victims are taken newest first, so pushing each to the front keeps the queue in admission
  // order: the oldest preempted sequence is readmitted first.
  waiting_.push_front(seq);
  ++preemptions_;
  ++result->num_preempted;
}

bool Scheduler::GrowOrPreempt(Sequence* seq, int64_t num_tokens, ScheduleResult* result) {
  while (!blocks_.Allocate(seq->id, num_tokens)) {
    Sequence* victim = nullptr;
    for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
      if (*it != seq && !(*it)->scheduled) {
        victim = *it;
        break;
      }
    }
    if (victim == nullptr) {
      Preempt(seq, result);
      return false;
    }
    Preempt(victim, result);
  }
  return true;
}

void Scheduler::AddChunk(Sequence* seq, int64_t n, int64_t* budget, ScheduleResult* result) {
  seq->scheduled = true;
  const bool last = seq->num_computed + n == static_cast<int64_t>(seq->tokens.size());
  result->chunks.push_back({seq, seq->num_computed, static_cast<int>(n), last});
  result->num_tokens += n;
  *budget = std::max<int64_t>(0, *budget - n);
}

void Scheduler::ScheduleRunning(bool decodes, int64_t* budget, ScheduleResult* result) {
  // A snapshot: preemption removes sequences from running_ while we walk it.
  const std::vector<Sequence*> order(running_.begin(), running_.end());
  for (Sequence* seq : order) {
    if (*budget == 0) break;
    const int64_t remaining = static_cast<int64_t>(seq->tokens.size()) - seq->num_computed;
    if (seq->state != Sequence::State::kRunning || seq->scheduled || (remaining == 1) != decodes) {
      continue;
    }
    const int64_t n = std::min(remaining, *budget);
    if (!GrowOrPreempt(seq, seq->num_computed + n, result)) continue;
    AddChunk(seq, n, budget, result);
  }
}

void Scheduler::AdmitWaiting(int64_t* budget, ScheduleResult* result) {
  while (!waiting_.empty() && *budget > 0 &&
         static_cast<int>(running_.size()) < options_.max_num_seqs) {
    Sequence* seq = waiting_.front();
    const int64_t len = static_cast<int64_t>(seq->tokens.size());
    const PrefixMatch match = blocks_.MatchPrefix(seq->tokens);
    const int64_t cached = match.num_tokens(blocks_.block_size());
    int64_t n = len - cached;
    if (options_.chunked_prefill) {
      n = std::min(n, *budget);
    } else if (n > *budget && !result->chunks.empty()) {
      break;  // runs whole: alone in a step when it exceeds the budget
    }
    if (!blocks_.CanAllocate(match, cached + n)) break;
    blocks_.AdoptPrefix(seq->id, match, len);
    const bool ok = blocks_.Allocate(seq->id, cached + n);
    assert(ok);
    (void)ok;
    seq->num_computed = cached;
    if (seq->cached_prompt_tokens < 0) {
      seq->cached_prompt_tokens = static_cast<int>(std::min<int64_t>(cached, seq->prompt_len));
    }
    waiting_.pop_front();
    seq->state = Sequence::State::kRunning;
    running_.push_back(seq);
    AddChunk(seq, n, budget, result);
  }
}

ScheduleResult Scheduler::Schedule() {
  ScheduleResult result;
  int64_t budget = options_.max_num_batched_tokens;
  ScheduleRunning(/*decodes=*/true, &budget, &result);
  ScheduleRunning(/*decodes=*/false, &budget, &result);
  // After a preemption the pool is short: admitting now would only preempt again next step.
  if (result.num_preempted == 0) AdmitWaiting(&budget, &result);
  for (const ScheduledChunk& c : result.chunks) c.seq->scheduled = false;
  return result;
}

std::vector<SequenceChunk> Scheduler::RunnerChunks(const ScheduleResult& result) const {
  std::vector<SequenceChunk> chunks;
  chunks.reserve(result.chunks.size());
  for (const ScheduledChunk& c : result.chunks) {
    std::span<const int32_t> tokens(c.seq->tokens);
    chunks.push_back({c.seq->id, tokens.subspan(static_cast<size_t>(c.start), c.num_tokens),
                      c.start, blocks_.BlockTable(c.seq->id), c.need_logits});
  }
  return chunks;
}

void Scheduler::CompleteStep(const ScheduleResult& result) {
  for (const ScheduledChunk& c : result.chunks) {
    c.seq->num_computed = c.start + c.num_tokens;
    blocks_.CommitFullBlocks(c.seq->id, c.seq->tokens, c.seq->num_computed);
  }
}

bool Scheduler::ReserveLookahead(Sequence* seq, int64_t num_tokens) {
  return blocks_.Allocate(seq->id, num_tokens);
}

void Scheduler::AcceptSpeculated(Sequence* seq, int num_accepted) {
  seq->num_computed += num_accepted;
  assert(seq->num_computed < static_cast<int64_t>(seq->tokens.size()));
  blocks_.CommitFullBlocks(seq->id, seq->tokens, seq->num_computed);
  blocks_.Truncate(seq->id, static_cast<int64_t>(seq->tokens.size()));
}

std::unique_ptr<Sequence> Scheduler::Remove(int64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return nullptr;
  std::unique_ptr<Sequence> seq = std::move(it->second);
  seqs_.erase(it);
  blocks_.Free(id);
  if (seq->state == Sequence::State::kRunning) {
    running_.remove(seq.get());
  } else {
    waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), seq.get()), waiting_.end());
  }
  return seq;
}

}  // namespace inferd::gen
