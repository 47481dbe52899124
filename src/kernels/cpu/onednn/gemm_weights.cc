#include "kernels/cpu/onednn/gemm_weights.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/onednn/dnnl_util.h"

namespace inferd::cpu {

namespace {

std::atomic<int64_t> g_plain_bytes{0};
std::atomic<int64_t> g_panel_bytes{0};

GemmPath PathFromEnvironment() {
  const char* env = std::getenv("INFERD_GEMM_PATH");
  if (env == nullptr || !std::strcmp(env, "") || !std::strcmp(env, "auto")) return GemmPath::kAuto;
  if (!std::strcmp(env, "rows")) return GemmPath::kByRows;
  if (!std::strcmp(env, "panel")) return GemmPath::kPanel;
  if (!std::strcmp(env, "onednn")) return GemmPath::kOneDnn;
  spdlog::warn("INFERD_GEMM_PATH={} is not one of auto, rows, panel, onednn: using auto", env);
  return GemmPath::kAuto;
}

std::atomic<GemmPath>& PathSetting() {
  static std::atomic<GemmPath> path{PathFromEnvironment()};
  return path;
}

}  // namespace

GemmPath GemmPathSetting() { return PathSetting().load(); }
void SetGemmPathForTesting(GemmPath path) { PathSetting().store(path); }

// gemm_crossover_bench on Zen 3 (2 threads, loaded machine): PanelGemm ahead at 1-32 rows on
// 768x768, 768x3072 and 3072x768, the two even at 64-256 (within the noise, either way by shape),
// oneDNN 1.4-1.7x ahead at 2048. So 32 for every shape: it only decides which copy a graph that
// sees both sizes keeps, and decode steps (1-32 rows) must keep the panels.
int64_t PanelGemmMaxRows(int64_t k, int64_t n) {
  (void)k;
  (void)n;
  return 32;
}

std::optional<GemmWeights::Policy> GemmWeights::ChooseFor(bool batch_invariant, int64_t k,
                                                          int64_t n) {
  switch (GemmPathSetting()) {
    case GemmPath::kPanel:
      return Policy::kPanel;
    case GemmPath::kOneDnn:
      return Policy::kPlain;
    case GemmPath::kByRows:
      return batch_invariant ? Policy::kPanel : Policy::kByRows;
    case GemmPath::kAuto:
      break;
  }
  if (PreferPanelGemm()) return batch_invariant ? Policy::kPanel : Policy::kByRows;
#if defined(__AVX2__) && defined(__FMA__)
  // AVX-512: oneDNN's packed layout, but a decoder's small weights on PanelGemm (the header).
  // (A build without AVX2 + FMA compiles PanelGemm's tile without them: oneDNN everywhere.)
  const bool small = k > 0 && n > 0 && k <= kSmallPanelWeightElements / n;
  if (batch_invariant && small) return Policy::kPanel;
#else
  (void)k;
  (void)n;
#endif
  return std::nullopt;
}

GemmWeights::~GemmWeights() {
  MutexLock l(&mu_);
  Account(-1);
}

void GemmWeights::Account(int sign) const {
  if (plain_.defined()) g_plain_bytes.fetch_add(sign * static_cast<int64_t>(plain_.ByteSize()));
  if (panel_)
    g_panel_bytes.fetch_add(sign * panel_->num_panels() * panel_->k() * PanelWeights::kPanel * 4);
}

GemmWeights::Totals GemmWeights::LiveTotals() {
  return Totals{g_plain_bytes.load(), g_panel_bytes.load()};
}

void GemmWeights::Reset(const Tensor& b, Policy policy) {
  MutexLock l(&mu_);
  Account(-1);
  k_ = b.dim(0);
  n_ = b.dim(1);
  policy_ = policy;
  max_rows_ = PanelGemmMaxRows(k_, n_);
  small_calls_ = large_calls_ = 0;
  panel_.reset();
  plain_ = b.owns_data() ? b : b.Clone();
  Account(+1);
  if (policy_ == Policy::kPanel) PackLocked();
}

// Packs the plain weights into panels and drops them: one copy stays.
void GemmWeights::PackLocked() const {
  auto panel = std::make_shared<PanelWeights>();
  panel->Pack(plain_.data<float>(), k_, n_);
  Account(-1);
  panel_ = std::move(panel);
  plain_ = Tensor();
  Account(+1);
}

GemmWeights::Layout GemmWeights::ForRows(int64_t rows) const {
  MutexLock l(&mu_);
  if (panel_) return Layout{panel_, Tensor()};
  if (policy_ == Policy::kByRows) {
    ++(rows <= max_rows_ ? small_calls_ : large_calls_);
    if (small_calls_ > large_calls_) {
      PackLocked();
      return Layout{panel_, Tensor()};
    }
  }
  return Layout{nullptr, plain_};
}

}  // namespace inferd::cpu
