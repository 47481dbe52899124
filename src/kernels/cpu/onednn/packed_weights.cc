#include "kernels/cpu/onednn/packed_weights.h"

#include <atomic>

#include "kernels/cpu/onednn/dnnl_util.h"
#include "kernels/cpu/util/float32.h"

namespace inferd::cpu {

namespace {
std::atomic<int64_t> g_live_layouts{0};
std::atomic<int64_t> g_live_bytes{0};
}  // namespace

PackedWeights::~PackedWeights() {
  for (const auto& p : packed_) {
    g_live_layouts.fetch_sub(1);
    g_live_bytes.fetch_sub(static_cast<int64_t>(p.first.get_size()));
  }
}

PackedWeights::Totals PackedWeights::LiveTotals() {
  return Totals{g_live_layouts.load(), g_live_bytes.load()};
}

void PackedWeights::Reset(const Tensor& w) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& p : packed_) {
    g_live_layouts.fetch_sub(1);
    g_live_bytes.fetch_sub(static_cast<int64_t>(p.first.get_size()));
  }
  // A float32 initializer that owns its buffer is shared, not copied; anything else (a view, or
  // another float type converted by ToFloat32) is owned here until the first packing.
  Tensor f = ToFloat32(w);
  plain_ = f.owns_data() ? f : f.Clone();
  packed_.clear();
  defined_ = true;
}

dnnl::memory PackedWeights::Get(const dnnl::memory::desc& user_md,
                                const dnnl::memory::desc& md) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [have_md, mem] : packed_) {
    if (have_md == md) return mem;
  }
  // oneDNN reorders into its Winograd weight formats but not out of them: only a blocked copy can
  // be the source of later layouts, so the plain weights stay until there is one.
  auto is_wino = [](const dnnl::memory::desc& d) {
    return d.data.format_kind == dnnl_format_kind_wino;
  };
  dnnl::engine& eng = DnnlEngine();
  dnnl::memory src;
  if (plain_.defined()) {
    src = dnnl::memory(user_md, eng, const_cast<void*>(plain_.raw_data()));
  } else {
    for (const auto& [have_md, mem] : packed_) {
      if (!is_wino(have_md)) {
        src = mem;
        break;
      }
    }
  }
  dnnl::memory dst(md, eng);
  dnnl::stream s(eng);
  dnnl::reorder(src, dst).execute(s, src, dst);
  s.wait();
  packed_.emplace_back(md, dst);
  g_live_layouts.fetch_add(1);
  g_live_bytes.fetch_add(static_cast<int64_t>(md.get_size()));
  if (!is_wino(md)) plain_ = Tensor();  // later layouts reorder from this copy
  return dst;
}

}  // namespace inferd::cpu
