// Memory planning end to end through Session: a steady-state Run of a small conv/matmul model
// allocates nothing for its activations (global allocation functions are replaced in this test
// binary to count calls), new shapes get their own plans, in-place residual buffers and concurrent
// planned runs give the unplanned results. The planner's own unit tests are in
// runtime/memory_plan_test.cc.
#include <fmt/format.h>

// operator new/delete below are malloc/free based on purpose.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <gtest/gtest.h>
#include <malloc.h>
#include <omp.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <new>
#include <thread>

#include "kernels/cpu/onednn/dnnl_util.h"
#include "session/session.h"
#include "session/test_util.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_aligned_allocs{0};  // aligned_alloc (Tensor)
std::atomic<int64_t> g_dnnl_buffers{0};    // posix_memalign >= 4 KiB (oneDNN)
std::atomic<int64_t> g_large_news{0};      // operator new of >= 4 KiB
constexpr size_t kLarge = 4096;
}  // namespace

extern "C" void* aligned_alloc(size_t alignment, size_t size) noexcept {
  if (g_counting.load(std::memory_order_relaxed)) g_aligned_allocs.fetch_add(1);
  return memalign(alignment, size);
}
extern "C" int posix_memalign(void** p, size_t alignment, size_t size) noexcept {
  // oneDNN allocates its small objects (memory, stream) this way too: count buffers only.
  if (size >= kLarge && g_counting.load(std::memory_order_relaxed)) g_dnnl_buffers.fetch_add(1);
  *p = memalign(alignment, size);
  return *p || size == 0 ? 0 : ENOMEM;
}

void* operator new(size_t size) {
  if (size >= kLarge && g_counting.load(std::memory_order_relaxed)) g_large_news.fetch_add(1);
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace inferd {
namespace {

using testing::AttrInt;
using testing::AttrInts;
using testing::ExpectTensorNear;
using testing::RandomFloat;

ValueInfo Decl(std::string name, std::vector<int64_t> dims) {
  ValueInfo vi;
  vi.name = std::move(name);
  vi.dtype = DataType::kFloat32;
  std::vector<Dim> shape;
  for (int64_t d : dims) {
    Dim dim;
    if (d >= 0)
      dim.value = d;
    else
      dim.param = "batch";
    shape.push_back(dim);
  }
  vi.shape = shape;
  return vi;
}

// x[N,3,16,16] -> Conv(8, 3x3, pad 1) -> Relu -> Reshape[N, 2048] -> MatMul(2048x10) -> Add
//   -> y (graph output); Reshape's view keeps the Relu buffer alive until MatMul.
Model ConvMatMulModel() {
  Model m;
  m.opsets[""] = 13;
  Graph& g = m.graph;
  g.name = "conv_matmul";
  g.inputs = {Decl("x", {-1, 3, 16, 16})};
  g.outputs = {Decl("y", {-1, 10})};
  g.initializers["w"] = RandomFloat({8, 3, 3, 3}, -0.5f, 0.5f, 1);
  g.initializers["b"] = RandomFloat({8}, -0.5f, 0.5f, 2);
  g.initializers["shape"] = Tensor::FromVector<int64_t>({-1, 2048});
  g.initializers["fc"] = RandomFloat({2048, 10}, -0.1f, 0.1f, 3);
  g.initializers["fcb"] = RandomFloat({10}, -0.1f, 0.1f, 4);
  Node* conv = g.AddNode("Conv", {"x", "w", "b"}, {"c"}, "conv");
  conv->attributes["pads"] = AttrInts({1, 1, 1, 1});
  g.AddNode("Relu", {"c"}, {"r"}, "relu");
  g.AddNode("Reshape", {"r", "shape"}, {"flat"}, "flatten");
  g.AddNode("MatMul", {"flat", "fc"}, {"mm"}, "fc");
  g.AddNode("Add", {"mm", "fcb"}, {"y"}, "fc_bias");
  // Declared types let the fusion and layout passes fire at the higher levels.
  g.value_info["c"] = Decl("c", {-1, 8, 16, 16});
  g.value_info["r"] = Decl("r", {-1, 8, 16, 16});
  g.value_info["flat"] = Decl("flat", {-1, 2048});
  g.value_info["mm"] = Decl("mm", {-1, 10});
  return m;
}

std::unique_ptr<Session> MakeSession(Model model,
                                     OptimizationLevel level = OptimizationLevel::kNone) {
  SessionOptions opts;
  opts.num_threads = 2;
  opts.optimization_level = level;
  auto s = Session::Create(std::move(model), opts);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

// The implementation oneDNN picks for the model's MatMul ([2, 2048] x [2048, 10] f32, constant
// weights in oneDNN's layout, user scratchpad: as kernels/cpu/math/matmul.cc creates it).
std::string MatMulImplementation() {
  using dnnl::memory;
  const auto f32 = memory::data_type::f32;
  const auto ab = memory::format_tag::ab;
  dnnl::matmul::desc desc(memory::desc({2, 2048}, f32, ab),
                          memory::desc({2048, 10}, f32, memory::format_tag::any),
                          memory::desc({2, 10}, f32, ab));
  dnnl::matmul::primitive_desc pd(desc, cpu::UserScratchpad(), cpu::DnnlEngine());
  return pd.impl_info_str();
}

TEST(MemoryPlannerTest, SteadyStateRunAllocatesNoActivations) {
  auto session = MakeSession(ConvMatMulModel());
  ASSERT_TRUE(session);
  Tensor x = RandomFloat({2, 3, 16, 16});
  std::vector<Tensor> first, out;
  ASSERT_TRUE(session->Run({x}, &first).ok());  // records sizes on the heap
  ASSERT_TRUE(session->Run({x}, &out).ok());    // first planned run
  ExpectTensorNear(out[0], first[0], 0, 0);

  g_aligned_allocs = 0;
  g_dnnl_buffers = 0;
  g_large_news = 0;
  g_counting = true;
  Status st = session->Run({x}, &out);
  g_counting = false;
  ASSERT_TRUE(st.ok()) << st.ToString();
  // The graph output is the only tensor allocated (it is returned to the caller).
  EXPECT_EQ(g_aligned_allocs.load(), 1);
  EXPECT_EQ(g_large_news.load(), 0);
  // oneDNN's buffers are the user scratchpads, allocated once, except where the MatMul runs on
  // oneDNN's sgemm driver ("gemm:jit": CPUs without AVX-512, where oneDNN 2.6 has no f32 brgemm
  // matmul): that driver mallocs its packing buffer inside every call, which no attribute moves
  // into the scratchpad. On those CPUs this 2-row MatMul runs PanelGemm instead (util/panel_gemm.h,
  // PreferPanelGemm; small row counts, onednn/gemm_weights.h) when this build compiles it to AVX2,
  // and PanelGemm allocates nothing.
  const std::string impl = MatMulImplementation();
  const bool sgemm = impl.rfind("gemm:", 0) == 0 && !cpu::PreferPanelGemm();
  EXPECT_EQ(g_dnnl_buffers.load(), sgemm ? 1 : 0) << impl;
  ExpectTensorNear(out[0], first[0], 0, 0);

  MemoryPlanStats stats = session->executor().memory_stats();
  EXPECT_EQ(stats.planned_tensors, 3u);  // c, r, mm (flat is a view; y is the output)
  EXPECT_LT(stats.arena_bytes, stats.sum_tensor_bytes);
}

TEST(MemoryPlannerTest, NewShapesGetTheirOwnPlansAndStayCorrect) {
  auto session = MakeSession(ConvMatMulModel());
  ASSERT_TRUE(session);
  std::vector<Tensor> a, b, out;
  Tensor x1 = RandomFloat({1, 3, 16, 16}, -1, 1, 11), x4 = RandomFloat({4, 3, 16, 16}, -1, 1, 12);
  ASSERT_TRUE(session->Run({x1}, &a).ok());
  ASSERT_TRUE(session->Run({x4}, &b).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(session->Run({x1}, &out).ok());
    ExpectTensorNear(out[0], a[0], 0, 0);
    ASSERT_TRUE(session->Run({x4}, &out).ok());
    ExpectTensorNear(out[0], b[0], 0, 0);
  }
}

// Each run context keeps the plans of max_cached_plans signatures: within it, no signature is
// planned twice; beyond it, the least recently used one is evicted and recorded again.
TEST(MemoryPlannerTest, PlansOfMaxCachedPlansSignaturesAreKept) {
  const int sizes = 12;
  for (size_t keep : {size_t{0}, size_t{sizes}}) {  // 0: the executor's default, 8
    SessionOptions opts;
    opts.num_threads = 1;
    opts.optimization_level = OptimizationLevel::kNone;
    opts.max_cached_plans = keep;
    auto s = Session::Create(ConvMatMulModel(), opts);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const Session& session = **s;
    std::vector<Tensor> out;
    for (int pass = 0; pass < 2; ++pass) {
      for (int n = 1; n <= sizes; ++n) {
        ASSERT_TRUE(session.Run({RandomFloat({n, 3, 16, 16}, -1, 1, n)}, &out).ok());
        EXPECT_EQ(out[0].dim(0), n);
      }
      // Pass 1 records every size; pass 2 again (cyclic order evicts each before its turn) only
      // when fewer plans are kept than there are sizes.
      const int64_t expected = pass == 0 || keep == size_t{sizes} ? sizes : 2 * sizes;
      EXPECT_EQ(session.executor().plans_recorded(), expected) << "keep " << keep << " pass "
                                                               << pass;
    }
  }
}

// Steps below ExecutorOptions::min_parallel_flops and min_parallel_bytes (4 MFLOP, 1 MiB) run on
// one thread once their signature is planned (its recording run costs them on num_threads). At
// batch 64 the convolution (2·64·8·256·27 = 7.1 MFLOP) keeps both threads and the 10-wide MatMul
// (2·64·2048·10 = 2.6 MFLOP, 0.6 MB) runs on one; serial_small_steps off keeps every step on two.
// The results do not depend on it.
TEST(MemoryPlannerTest, SmallStepsRunOnOneThread) {
  Tensor x = RandomFloat({64, 3, 16, 16}, -1, 1, 7);
  std::vector<Tensor> reference;
  for (bool serial_small : {false, true}) {
    SessionOptions opts;
    opts.num_threads = 2;
    opts.optimization_level = OptimizationLevel::kNone;
    opts.serial_small_steps = serial_small;
    auto s = Session::Create(ConvMatMulModel(), opts);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const GraphExecutor& e = (*s)->executor();
    std::vector<Tensor> out;
    for (int run = 0; run < 3; ++run) {
      omp_set_num_threads(1);  // Session::Run sets its own count
      e.ResetProfile();
      e.set_profiling(true);
      ASSERT_TRUE((*s)->Run({x}, &out).ok());
      e.set_profiling(false);
      EXPECT_EQ(omp_get_max_threads(), 2) << "a run ends on num_threads";
      for (const NodeProfile& n : e.Profile()) {
        // The first run records the plan on num_threads.
        const bool small = n.op_type == "MatMul" || n.op_type == "Add";
        const int expected = run > 0 && serial_small && small ? 1 : 2;
        EXPECT_EQ(n.threads, expected) << n.name << " run " << run << " serial " << serial_small;
      }
      if (reference.empty()) {
        reference = out;
      } else {
        ExpectTensorNear(out[0], reference[0], 1e-5f, 1e-5f);
      }
    }
  }
}

// Two residual blocks: in the first the residual is also the convolution's own input (its buffer
// must not be taken over: the convolution still reads it), in the second the residual dies at the
// convolution that adds it (at level all its output takes over the residual's buffer in place).
Model ResidualModel() {
  Model m;
  m.opsets[""] = 13;
  Graph& g = m.graph;
  g.name = "residual";
  g.inputs = {Decl("x", {-1, 16, 8, 8})};
  g.outputs = {Decl("y", {-1, 8, 8, 8})};
  for (int i = 1; i <= 4; ++i) {
    g.initializers[fmt::format("w{}", i)] = RandomFloat({16, 16, 3, 3}, -0.1f, 0.1f, 20 + i);
  }
  g.initializers["w5"] = RandomFloat({8, 16, 1, 1}, -0.3f, 0.3f, 25);
  auto conv = [&](const std::string& in, const std::string& w, const std::string& out) {
    Node* n = g.AddNode("Conv", {in, w}, {out}, out);
    if (w != "w5") n->attributes["pads"] = AttrInts({1, 1, 1, 1});
  };
  conv("x", "w1", "c1");
  g.AddNode("Relu", {"c1"}, {"r1"}, "relu1");
  conv("r1", "w2", "c2");
  g.AddNode("Add", {"c2", "r1"}, {"s2"}, "add2");  // Z is the conv's own input
  g.AddNode("Relu", {"s2"}, {"t2"}, "relu2");
  conv("t2", "w3", "c3");
  g.AddNode("Relu", {"c3"}, {"r3"}, "relu3");
  conv("r3", "w4", "c4");
  g.AddNode("Add", {"c4", "t2"}, {"s4"}, "add4");  // Z dies here: in place
  g.AddNode("Relu", {"s4"}, {"t4"}, "relu4");
  conv("t4", "w5", "y");
  for (const char* v : {"c1", "r1", "c2", "s2", "t2", "c3", "r3", "c4", "s4", "t4"}) {
    g.value_info[v] = Decl(v, {-1, 16, 8, 8});  // types let the fusion passes fire
  }
  return m;
}

TEST(MemoryPlannerTest, InPlaceResidualRunsMatchUnoptimized) {
  auto plain = MakeSession(ResidualModel(), OptimizationLevel::kNone);
  auto fused = MakeSession(ResidualModel(), OptimizationLevel::kAll);
  ASSERT_TRUE(plain && fused);
  Tensor x = RandomFloat({2, 16, 8, 8}, -1, 1, 7);
  std::vector<Tensor> ref, out;
  ASSERT_TRUE(plain->Run({x}, &ref).ok());
  for (int i = 0; i < 3; ++i) {  // recording run, then planned runs with the in-place buffer
    Status st = fused->Run({x}, &out);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ExpectTensorNear(out[0], ref[0], 1e-4f, 1e-4f);
  }
}

// Two 3x3 convolutions (Winograd at level all) and a 1x1, run at batch 1, 16, 1, 16: oneDNN may
// pick a different Winograd variant (weight format) per batch size, and it cannot reorder weights
// out of a Winograd format, so each new layout must come from the plain or a blocked copy.
Model WinogradModel() {
  Model m;
  m.opsets[""] = 13;
  Graph& g = m.graph;
  g.name = "wino";
  g.inputs = {Decl("x", {-1, 64, 14, 14})};
  g.outputs = {Decl("y", {-1, 16, 14, 14})};
  g.initializers["w1"] = RandomFloat({64, 64, 3, 3}, -0.05f, 0.05f, 31);
  g.initializers["w2"] = RandomFloat({64, 64, 3, 3}, -0.05f, 0.05f, 32);
  g.initializers["w3"] = RandomFloat({16, 64, 1, 1}, -0.2f, 0.2f, 33);
  for (const char* w : {"w1", "w2"}) {
    const std::string in = w == std::string("w1") ? "x" : "r1";
    const std::string c = w == std::string("w1") ? "c1" : "c2";
    Node* n = g.AddNode("Conv", {in, w}, {c}, c);
    n->attributes["pads"] = AttrInts({1, 1, 1, 1});
    g.AddNode("Relu", {c}, {w == std::string("w1") ? "r1" : "r2"}, "relu_" + c);
  }
  g.AddNode("Conv", {"r2", "w3"}, {"y"}, "c3");
  for (const char* v : {"c1", "r1", "c2", "r2"}) g.value_info[v] = Decl(v, {-1, 64, 14, 14});
  return m;
}

TEST(MemoryPlannerTest, WinogradWeightsServeSeveralBatchSizes) {
  auto plain = MakeSession(WinogradModel(), OptimizationLevel::kNone);
  auto fused = MakeSession(WinogradModel(), OptimizationLevel::kAll);
  ASSERT_TRUE(plain && fused);
  for (int64_t batch : std::vector<int64_t>{1, 16, 1, 16}) {
    Tensor x = RandomFloat({batch, 64, 14, 14}, -1, 1, static_cast<uint32_t>(batch));
    std::vector<Tensor> ref, out;
    ASSERT_TRUE(plain->Run({x}, &ref).ok());
    Status st = fused->Run({x}, &out);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ExpectTensorNear(out[0], ref[0], 1e-4f, 1e-4f);
  }
}

// Concurrent runs of one session, with plain kernels (level none) and with the fused and
// blocked-layout ones (level all): cached oneDNN primitives must be safe to run from several threads.
class ConcurrentRunsTest : public ::testing::TestWithParam<OptimizationLevel> {};

TEST_P(ConcurrentRunsTest, PlannedRunsAgree) {
  auto session = MakeSession(ConvMatMulModel(), GetParam());
  ASSERT_TRUE(session);
  Tensor x = RandomFloat({3, 3, 16, 16}, -1, 1, 5);
  std::vector<Tensor> ref;
  ASSERT_TRUE(session->Run({x}, &ref).ok());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        std::vector<Tensor> out;
        if (!session->Run({x}, &out).ok() || out[0].ByteSize() != ref[0].ByteSize() ||
            std::memcmp(out[0].raw_data(), ref[0].raw_data(), ref[0].ByteSize()) != 0) {
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Levels, ConcurrentRunsTest,
                         ::testing::Values(OptimizationLevel::kNone, OptimizationLevel::kAll));

}  // namespace
}  // namespace inferd
