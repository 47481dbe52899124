// GraphExecutor: runs one Graph (a model's main graph or a control-flow body) with kernels from an
// ExecutionProvider. Built once; Run() is const and thread-safe (each call has its own frame).
//
// Run binds inputs by position (Graph::inputs order), initializers as read-only views, and values
// captured from enclosing scopes through the parent frame. Intermediate tensors are released after
// their last consumer.
//
// Memory (main graphs, ExecutorOptions::plan_memory): kernel outputs allocated through
// KernelContext::AllocateOutput live in an arena owned by a run context. The first run of an input
// shape signature allocates on the heap while a MemoryRecorder (memory_plan.h) notes each output's
// size, its producing step and the step of its last use (views such as Reshape outputs extend the
// lifetime of the buffer they alias; in-place outputs take over their input's buffer); the
// recorder's MemoryPlan then gives arena offsets, and later runs of that signature hand out arena
// views with no heap allocation. Allocations larger than planned
// (data-dependent shapes) fall back to the heap. Graph outputs are never in the arena: they are
// heap-allocated, or copied when they alias one. Each concurrent Run takes its own run context
// (arena + plan cache, at most `max_cached_plans` signatures, least recently used evicted) from a
// pool, so the pool grows to the peak number of concurrent runs and its arenas are reused
// afterwards.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "graph/graph.h"
#include "runtime/execution_provider.h"
#include "runtime/memory_plan.h"
#include "runtime/node_cost.h"
#include "runtime/op_kernel.h"

namespace inferd {

struct ExecutorOptions {
  // Intra-op threads for kernels (OpenMP); >= 1.
  int num_threads = 1;
  // Plan activations into a per-run-context arena (main graphs only; subgraphs use the heap).
  bool plan_memory = true;
  // Input shape signatures whose plans each run context keeps (least recently used evicted; a
  // run of an evicted signature records again). A server batching requests sizes this from the
  // model's max_batch_size (SessionOptions::max_cached_plans), so every batch size keeps its plan.
  size_t max_cached_plans = 8;
  // Steps too small to gain from num_threads > 1 run on one thread: forking and joining the
  // OpenMP team costs microseconds per parallel region (and its woken threads spin on cores a
  // server's I/O threads need), more than a small step saves. A step keeps every thread when its
  // cost (node_cost.h, from the shapes of the signature's recording run) reaches either figure:
  // FLOPs for compute ops, bytes read + written for any op; steps without a figure (control flow)
  // keep them too. 4 MFLOP is about 25 us on one AVX-512 core: DLRM at batch 64 keeps its three
  // wide matmuls parallel and runs its embedding gathers, small matmuls and concats on one
  // thread (docs/serving.md). Both 0: every step on num_threads. NodeProfile::threads shows it.
  double min_parallel_flops = 4e6;
  double min_parallel_bytes = 1 << 20;
  // Initializers whose every reader released them (KernelInfo::ReleaseConstantInput) are fed to
  // the kernels as data-less placeholders, and listed by ReleasableInitializers() for the owner of
  // the graph to free. Off: the executor keeps pointing at the graph's tensors.
  bool release_constants = false;
  // Debugging: fill the arena with 0xFF bytes (float NaN) before every planned run, so a kernel
  // that reads output memory it did not write (e.g. relies on a zero fill it skipped) shows up.
  bool poison_arena = false;
  // Kernels whose products may be computed by more than one algorithm depending on the row count
  // (float32 MatMul / FusedMatMul with a constant weight, kernels/cpu/onednn/gemm_weights.h) use
  // one for every row count: a row's result does not depend on the rows batched with it.
  bool batch_invariant_matmul = false;
};

// Values of one run of one graph; the parent is the frame of the enclosing graph (for subgraphs).
class ExecutionFrame {
 public:
  // Finds a value by name in this frame or any enclosing one; nullptr if absent.
  virtual const Tensor* Lookup(const std::string& name) const = 0;
  // Storage for output i of the node being computed, from the run's arena when planned, else from
  // the heap. Zero-initialised when `zero`; otherwise the kernel must write every byte. An output
  // the kernel allows in place (OpKernel::InPlaceInput) may come back holding that input's data.
  virtual Tensor AllocateOutput(size_t i, DataType dtype, Shape shape, bool zero) const {
    (void)i;
    (void)zero;
    return Tensor::Allocate(dtype, std::move(shape));
  }

 protected:
  ~ExecutionFrame() = default;
};

// Accumulated time of one node over the runs made while profiling was on, and its arithmetic and
// memory traffic over those runs (node_cost.h, from the shapes each run read and wrote).
struct NodeProfile {
  std::string name;
  std::string op_type;
  int64_t calls = 0;
  double total_ms = 0;
  double total_flops = 0;
  double total_bytes = 0;
  CostBound bound = CostBound::kNone;  // of the last profiled call
  bool int8 = false;                   // of the last profiled call
  int threads = 0;                     // intra-op threads of the last profiled call
};

class GraphExecutor {
 public:
  // `graph` must outlive the executor. `outer_scope` lists names the graph may capture from
  // enclosing graphs (resolved at run time). `model` gives opset versions.
  static StatusOr<std::shared_ptr<GraphExecutor>> Create(
      const Graph& graph, const Model& model, std::shared_ptr<ExecutionProvider> provider,
      const ExecutorOptions& options, const std::vector<std::string>& outer_scope = {});
  ~GraphExecutor();

  const Graph& graph() const { return graph_; }

  // inputs: one per graph input, in order. outputs: one per graph output. `parent` resolves
  // captured values (null for a main graph). Output tensors always own their memory or share
  // ownership of an initializer; never views into `inputs` or the arena.
  Status Run(std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
             const ExecutionFrame* parent = nullptr) const;

  // The memory plan of the most recently planned input signature (memory_plan.h).
  MemoryPlanStats memory_stats() const;
  // Memory plans recorded so far (first runs of a signature in a run context, and runs of a
  // signature whose plan was evicted): constant in steady state unless the signatures in use
  // outnumber max_cached_plans.
  int64_t plans_recorded() const { return plans_recorded_.load(std::memory_order_relaxed); }
  // Initializers no step reads any more (ExecutorOptions::release_constants): the graph's owner
  // may erase them.
  const std::vector<std::string>& ReleasableInitializers() const { return releasable_; }

  // Per-node timing (wall clock around each Compute, summed over runs; costs two clock reads per
  // node, and the node's cost estimate after the clock stops). Profile() lists nodes in execution
  // order.
  void set_profiling(bool on) const { profiling_.store(on); }
  std::vector<NodeProfile> Profile() const;
  void ResetProfile() const;

 private:
  struct Step {
    const Node* node;
    std::unique_ptr<OpKernel> kernel;
    std::vector<int> inputs;         // value slot per input; -1 for omitted
    std::vector<int> outputs;        // value slot per output; -1 for omitted
    std::vector<int> release_after;  // slots whose last use is this step
    std::vector<int> inplace_input;  // per output: OpKernel::InPlaceInput, -1 for none
    std::vector<bool> released;      // per input: KernelInfo::ReleaseConstantInput
  };
  struct CachedPlan;
  struct RunContext;
  struct RunMemory;
  class ContextLease;
  class Frame;
  class StepThreads;
  using SubgraphFactory = std::function<StatusOr<std::shared_ptr<GraphExecutor>>(const Graph&)>;

  GraphExecutor(const Graph& graph, const Model& model);
  int SlotOf(const std::string& name);
  // Create, in order: slots of inputs, initializers and captured values; one step per node;
  // output slots; released constants; lifetimes.
  Status BindSlots(const std::vector<std::string>& outer_scope);
  Status BuildSteps();
  StatusOr<Step> MakeStep(const Node& node, const SubgraphFactory& make_subgraph);
  Status BindOutputs();
  void ReleaseConstants();
  void PlanLifetimes();

  // Run: bind the frame, pick or start the memory plan, run each step, collect the outputs.
  Status RunSteps(std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
                  const ExecutionFrame* parent, RunContext* context) const;
  Status BindFrame(std::span<const Tensor> inputs, const ExecutionFrame* parent,
                   Frame* frame) const;
  RunMemory BeginMemory(std::span<const Tensor> inputs, RunContext* context, Frame* frame) const;
  // `ns` and `cost` (null unless profiling, or recording) receive the step's time and cost;
  // `threads` are the intra-op threads it runs on.
  Status RunStep(size_t s, const RunMemory& memory, Frame* frame, int threads, int64_t* ns,
                 NodeCost* cost, std::vector<const Tensor*>& in_ptrs,
                 std::vector<Tensor>& out_vals) const;
  Status StoreOutput(size_t s, size_t o, const RunMemory& memory,
                     std::span<const Tensor* const> in_ptrs, Tensor& out, Frame* frame) const;
  Status CollectOutputs(const Frame& frame, std::vector<Tensor>* outputs) const;
  void AddProfile(const std::vector<int64_t>& step_ns, const std::vector<NodeCost>& step_cost,
                  const std::vector<int>& step_threads) const;
  void FinishRecording(RunMemory& memory, RunContext* context,
                       std::vector<int> step_threads) const;
  // The intra-op threads of a step of this cost (ExecutorOptions::min_parallel_flops / bytes).
  int ThreadsFor(const NodeCost& cost) const;

  const Graph& graph_;
  const Model& model_;
  ExecutorOptions options_;
  std::shared_ptr<ExecutionProvider> provider_;
  std::unordered_map<std::string, int> slots_;
  std::vector<std::string> slot_names_;
  std::vector<Step> steps_;
  std::vector<int> input_slots_;
  std::vector<int> output_slots_;
  std::vector<std::pair<int, const Tensor*>> constant_slots_;  // initializers
  std::vector<std::string> releasable_;
  std::list<Tensor> placeholders_;  // data-less stand-ins for released initializers
  std::vector<int> outer_slots_;                               // captured from parent frames
  std::vector<int> slot_last_step_;  // step after which a produced slot is released; graph outputs:
                                     // steps_.size()

  // Of the executor's own state, concurrent Runs share only what the two mutexes below guard
  // (each Run works in a RunContext of its own; kernels lock their own caches). Neither mutex is
  // held while another lock is taken, nor around a kernel's Compute.
  mutable Mutex pool_mu_;  // the pool of idle run contexts, and the last plan's statistics
  mutable std::vector<std::unique_ptr<RunContext>> free_contexts_ GUARDED_BY(pool_mu_);
  mutable MemoryPlanStats last_stats_ GUARDED_BY(pool_mu_);

  mutable std::atomic<int64_t> plans_recorded_{0};
  mutable std::atomic<bool> profiling_{false};
  mutable Mutex profile_mu_;  // the profile counters, updated once per profiled Run
  struct StepProfile {
    int64_t calls = 0;
    int64_t ns = 0;
    double flops = 0;
    double bytes = 0;
    NodeCost last;  // bound and int8 of the last call
    int threads = 0;  // of the last call
  };
  mutable std::vector<StepProfile> profile_ GUARDED_BY(profile_mu_);
};

}  // namespace inferd
