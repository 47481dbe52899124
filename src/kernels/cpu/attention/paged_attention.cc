#include "kernels/cpu/attention/paged_attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/attention/flash_attention.h"
#include "kernels/cpu/util/kernel_util.h"

namespace inferd::cpu {
namespace {

// Query rows (heads × tokens) per work item: one FlashAttention sub-tile, so a prefill splits
// into enough items to keep every thread busy.
constexpr int64_t kItemRows = kFlashTileRows;

// One unit of parallel work: a query-token range of one sequence, all heads of one KV group.
struct WorkItem {
  int64_t seq, kv_head, j0, j1, cost;
};

// The tile of item w (tokens [j0, j1) of sequence w.seq, query heads of KV head w.kv_head).
AttentionTile MakeTile(const PagedAttentionArgs& a, const WorkItem& w, float* out) {
  const int64_t group = a.num_heads / a.num_kv_heads, d = a.head_dim, t = a.num_tokens;
  const int64_t first = a.query_start[w.seq] + w.j0;
  const int64_t n = a.query_start[w.seq + 1] - a.query_start[w.seq];
  AttentionTile tile;
  tile.q = a.query + (w.kv_head * group * t + first) * d;
  tile.q_head_stride = t * d;
  tile.q_row_stride = d;
  tile.out = out + (w.kv_head * group * t + first) * d;
  tile.out_head_stride = t * d;
  tile.out_row_stride = d;
  tile.num_heads = group;
  tile.num_rows = w.j1 - w.j0;
  tile.head_dim = tile.value_dim = d;
  tile.scale = a.scale;
  const int64_t head_offset = w.kv_head * a.block_size * d;
  tile.key.row_stride = d;
  tile.key.block_table = a.block_tables + w.seq * a.max_blocks_per_seq;
  tile.key.block_size = a.block_size;
  tile.key.block_stride = a.num_kv_heads * a.block_size * d;
  tile.value = tile.key;
  if (a.int8_cache()) {
    const int64_t scale_offset = w.kv_head * a.block_size;
    tile.key.qdata = a.key_cache_i8 + head_offset;
    tile.key.scales = a.key_scales + scale_offset;
    tile.key.scale_block_stride = a.num_kv_heads * a.block_size;
    tile.value.qdata = a.value_cache_i8 + head_offset;
    tile.value.scales = a.value_scales + scale_offset;
    tile.value.scale_block_stride = tile.key.scale_block_stride;
  } else {
    tile.key.data = a.key_cache + head_offset;
    tile.value.data = a.value_cache + head_offset;
  }
  tile.num_keys = a.context_lens[w.seq];
  tile.causal_offset = tile.num_keys - n + w.j0;
  return tile;
}

std::vector<WorkItem> MakeWorkItems(const PagedAttentionArgs& a, int64_t tokens_per_item) {
  std::vector<WorkItem> items;
  for (int64_t s = 0; s < a.num_seqs; ++s) {
    const int64_t n = a.query_start[s + 1] - a.query_start[s];
    const int64_t past = a.context_lens[s] - n;
    for (int64_t j0 = 0; j0 < n; j0 += tokens_per_item) {
      const int64_t j1 = std::min(n, j0 + tokens_per_item);
      for (int64_t g = 0; g < a.num_kv_heads; ++g) {
        items.push_back({s, g, j0, j1, (past + j1) * (j1 - j0)});
      }
    }
  }
  // Largest first, so the dynamic schedule ends with small items (balanced finish).
  std::stable_sort(items.begin(), items.end(),
                   [](const WorkItem& x, const WorkItem& y) { return x.cost > y.cost; });
  return items;
}

void WriteCache(const PagedAttentionArgs& a) {
  const int64_t d = a.head_dim, bs = a.block_size;
  ParallelFor(a.num_tokens, 64, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t block = a.slot_mapping[t] / bs, offset = a.slot_mapping[t] % bs;
      for (int64_t g = 0; g < a.num_kv_heads; ++g) {
        const int64_t row = (block * a.num_kv_heads + g) * bs + offset;  // scale index
        const int64_t dst = row * d;
        const int64_t src = (g * a.num_tokens + t) * d;
        if (a.int8_cache()) {
          QuantizeKvRow(a.key + src, d, a.key_cache_i8 + dst, a.key_scales + row);
          QuantizeKvRow(a.value + src, d, a.value_cache_i8 + dst, a.value_scales + row);
        } else {
          std::memcpy(a.key_cache + dst, a.key + src, d * sizeof(float));
          std::memcpy(a.value_cache + dst, a.value + src, d * sizeof(float));
        }
      }
    }
  });
}

}  // namespace

void QuantizeKvRow(const float* x, int64_t n, int8_t* q, float* scale) {
  float amax = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isfinite(x[i])) amax = std::max(amax, std::fabs(x[i]));
  }
  const float s = amax / 127.f, inv = s > 0.f ? 1.f / s : 0.f;
  for (int64_t i = 0; i < n; ++i) {
    const float r = std::isfinite(x[i]) ? std::clamp(x[i] * inv, -127.f, 127.f) : 0.f;
    q[i] = static_cast<int8_t>(std::nearbyint(r));
  }
  *scale = s;
}

Status CheckPagedAttentionArgs(const PagedAttentionArgs& a) {
  if (a.num_heads <= 0 || a.num_kv_heads <= 0 || a.num_heads % a.num_kv_heads != 0) {
    return InvalidArgument(
        "PagedAttention: num_heads {} is not a positive multiple of "
        "num_kv_heads {}",
        a.num_heads, a.num_kv_heads);
  }
  if (a.head_dim <= 0 || a.block_size <= 0) {
    return InvalidArgument("PagedAttention: head_dim {} and block_size {} must be positive",
                           a.head_dim, a.block_size);
  }
  const int64_t slots = a.num_blocks * a.block_size;
  for (int64_t t = 0; t < a.num_tokens; ++t) {
    if (a.slot_mapping[t] < 0 || a.slot_mapping[t] >= slots) {
      return InvalidArgument(
          "PagedAttention: slot_mapping[{}] = {} is outside the cache's {} "
          "slots",
          t, a.slot_mapping[t], slots);
    }
  }
  if (a.query_start[0] != 0 || a.query_start[a.num_seqs] != a.num_tokens) {
    return InvalidArgument(
        "PagedAttention: query_start must run from 0 to the {} tokens, got "
        "{} .. {}",
        a.num_tokens, a.query_start[0], a.query_start[a.num_seqs]);
  }
  for (int64_t s = 0; s < a.num_seqs; ++s) {
    const int64_t n = a.query_start[s + 1] - a.query_start[s], len = a.context_lens[s];
    if (n < 0) return InvalidArgument("PagedAttention: query_start decreases at {}", s + 1);
    if (len < n || len > a.max_blocks_per_seq * a.block_size) {
      return InvalidArgument(
          "PagedAttention: context_lens[{}] = {} must be in [{} new tokens, "
          "{} = max_blocks_per_seq * block_size]",
          s, len, n, a.max_blocks_per_seq * a.block_size);
    }
    const int64_t* table = a.block_tables + s * a.max_blocks_per_seq;
    for (int64_t b = 0; b * a.block_size < len; ++b) {
      if (table[b] < 0 || table[b] >= a.num_blocks) {
        return InvalidArgument(
            "PagedAttention: block_tables[{}][{}] = {} is not a block id "
            "(cache has {} blocks; sequence needs {} tokens)",
            s, b, table[b], a.num_blocks, len);
      }
    }
  }
  return Status::Ok();
}

// Multiply-adds below which a step's attention runs on the calling thread (~20 us of work).
constexpr int64_t kMinParallelWork = int64_t{1} << 17;

void PagedAttention(const PagedAttentionArgs& a, float* out) {
  WriteCache(a);
  const int64_t group = a.num_heads / a.num_kv_heads;
  const std::vector<WorkItem> items = MakeWorkItems(a, std::max<int64_t>(1, kItemRows / group));
  const int64_t n = static_cast<int64_t>(items.size());
  // Query-key dot products of length head_dim in the whole step. A short decode (one sequence, a
  // few dozen positions) is microseconds of arithmetic: a parallel region's fork and barrier cost
  // more than that, far more on a loaded host where the other thread may not be running.
  int64_t work = 0;
  for (const WorkItem& item : items) work += item.cost;
  work *= group * a.head_dim;
  const int threads = omp_in_parallel() || work < kMinParallelWork
                          ? 1
                          : static_cast<int>(std::min<int64_t>(omp_get_max_threads(), n));
#pragma omp parallel for num_threads(std::max(threads, 1)) schedule(dynamic, 1) if (threads > 1)
  for (int64_t i = 0; i < n; ++i) FlashAttention(MakeTile(a, items[i], out));
}

void PagedAttentionReference(const PagedAttentionArgs& a, float* out) {
  WriteCache(a);
  for (int64_t s = 0; s < a.num_seqs; ++s) {
    const int64_t n = a.query_start[s + 1] - a.query_start[s];
    for (int64_t g = 0; g < a.num_kv_heads; ++g) {
      ReferenceAttention(MakeTile(a, {s, g, 0, n, 0}, out));
    }
  }
}

}  // namespace inferd::cpu
