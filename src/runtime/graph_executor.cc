#include "runtime/graph_executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <list>
#include <unordered_set>

#include "runtime/arena.h"
#include "runtime/memory_plan.h"

namespace inferd {
namespace {

enum class MemoryMode { kHeap, kRecord, kPlanned };

// Values of enclosing scopes that the node's subgraphs (If/Loop/Scan bodies) read.
std::vector<std::string> CapturedValues(const Node& node) {
  std::vector<std::string> names;
  for (const auto& [key, attr] : node.attributes) {
    std::vector<std::shared_ptr<Graph>> subs = attr.graphs;
    if (attr.g) subs.push_back(attr.g);
    for (const auto& sub : subs) {
      for (const auto& name : sub->OuterScopeValues()) names.push_back(name);
    }
  }
  return names;
}

// The profiled cost of a step (node_cost.h) from the tensors it read and wrote.
NodeCost StepCost(const Node& node, std::span<const Tensor* const> inputs,
                  std::span<const Tensor> outputs) {
  std::vector<TensorDims> in(inputs.size()), out(outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] == nullptr) {
      in[i].present = false;
    } else {
      in[i] = {inputs[i]->dtype(), inputs[i]->shape(), true};
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined()) {
      out[i].present = false;
    } else {
      out[i] = {outputs[i].dtype(), outputs[i].shape(), true};
    }
  }
  return EstimateNodeCost(node, in, out);
}

}  // namespace

class GraphExecutor::Frame final : public ExecutionFrame {
 public:
  Frame(const std::unordered_map<std::string, int>& slots, size_t n, const ExecutionFrame* parent)
      : slots_(slots), values(n), ptrs(n, nullptr), parent_(parent) {}

  const Tensor* Lookup(const std::string& name) const override {
    auto it = slots_.find(name);
    if (it != slots_.end() && ptrs[it->second] != nullptr) return ptrs[it->second];
    return parent_ ? parent_->Lookup(name) : nullptr;
  }

  Tensor AllocateOutput(size_t i, DataType dtype, Shape shape, bool zero) const override {
    size_t bytes = SizeOf(dtype);
    bool valid = true;
    for (int64_t d : shape) {
      if (d < 0) valid = false;
      bytes *= static_cast<size_t>(std::max<int64_t>(d, 0));
    }
    if (mode == MemoryMode::kPlanned && valid && bytes > 0 && i < planned_outs.size()) {
      const PlannedOutput& po = planned_outs[i];
      // An in-place output shares its input's buffer: zero-filling it would destroy the input.
      if (po.offset >= 0 && bytes <= po.bytes && !(zero && po.in_place)) {
        char* p = arena_base + po.offset;
        if (zero) std::memset(p, 0, bytes);
        own[i] = p;
        return Tensor::View(dtype, std::move(shape), p);
      }
    }
    Tensor t = Tensor::Allocate(dtype, std::move(shape));
    if (mode == MemoryMode::kRecord && i < own.size()) own[i] = t.raw_data();
    return t;
  }

  const std::unordered_map<std::string, int>& slots_;
  std::vector<Tensor> values;       // tensors produced in this frame
  std::vector<const Tensor*> ptrs;  // current value of each slot (into values, inputs, constants)
  const ExecutionFrame* parent_;

  // Memory planning state of the step being computed.
  MemoryMode mode = MemoryMode::kHeap;
  char* arena_base = nullptr;
  std::span<const PlannedOutput> planned_outs;
  mutable std::vector<const void*> own;  // per output: the storage AllocateOutput handed out
};

// What a run context keeps of one input signature.
struct GraphExecutor::CachedPlan {
  std::vector<int64_t> signature;
  std::shared_ptr<const MemoryPlan> memory;
  // Intra-op threads per step (ExecutorOptions::min_parallel_flops / min_parallel_bytes, from the
  // costs of the recording run); empty: every step on num_threads.
  std::vector<int> step_threads;
};

struct GraphExecutor::RunContext {
  Arena arena;
  // Most recently used first; at most ExecutorOptions::max_cached_plans entries.
  std::list<CachedPlan> plans;
  MemoryRecorder recording;  // scratch for the recording run
};

// The memory side of one run: the plan it follows (planned runs, arena set) or the recording it
// makes (the first run of a signature).
struct GraphExecutor::RunMemory {
  std::vector<int64_t> signature;
  std::shared_ptr<const MemoryPlan> plan;
  CachedPlan* entry = nullptr;  // the context's entry of a planned run
  const Arena* arena = nullptr;
  MemoryRecorder* recorder = nullptr;
};

// Takes a run context from the pool for one Run and returns it afterwards.
class GraphExecutor::ContextLease {
 public:
  explicit ContextLease(const GraphExecutor& ex) : ex_(ex) {
    MutexLock lock(&ex_.pool_mu_);
    if (!ex_.free_contexts_.empty()) {
      ctx_ = std::move(ex_.free_contexts_.back());
      ex_.free_contexts_.pop_back();
    }
  }
  ~ContextLease() {
    if (!ctx_) return;
    MutexLock lock(&ex_.pool_mu_);
    ex_.free_contexts_.push_back(std::move(ctx_));
  }
  RunContext* get() {
    if (!ctx_) ctx_ = std::make_unique<RunContext>();
    return ctx_.get();
  }

 private:
  const GraphExecutor& ex_;
  std::unique_ptr<RunContext> ctx_;
};

GraphExecutor::GraphExecutor(const Graph& graph, const Model& model)
    : graph_(graph), model_(model) {}
GraphExecutor::~GraphExecutor() = default;

int GraphExecutor::SlotOf(const std::string& name) {
  auto [it, inserted] = slots_.emplace(name, static_cast<int>(slot_names_.size()));
  if (inserted) slot_names_.push_back(name);
  return it->second;
}

StatusOr<std::shared_ptr<GraphExecutor>> GraphExecutor::Create(
    const Graph& graph, const Model& model, std::shared_ptr<ExecutionProvider> provider,
    const ExecutorOptions& options, const std::vector<std::string>& outer_scope) {
  std::shared_ptr<GraphExecutor> ex(new GraphExecutor(graph, model));
  ex->options_ = options;
  ex->provider_ = provider;
  RETURN_IF_ERROR(ex->BindSlots(outer_scope));
  RETURN_IF_ERROR(ex->BuildSteps());
  RETURN_IF_ERROR(ex->BindOutputs());
  if (options.release_constants) ex->ReleaseConstants();
  ex->PlanLifetimes();
  {
    MutexLock lock(&ex->profile_mu_);  // not shared yet: for the analysis only
    ex->profile_.assign(ex->steps_.size(), StepProfile{});
  }
  return ex;
}

Status GraphExecutor::BindSlots(const std::vector<std::string>& outer_scope) {
  for (const ValueInfo& vi : graph_.inputs) input_slots_.push_back(SlotOf(vi.name));
  std::unordered_set<int> input_set(input_slots_.begin(), input_slots_.end());
  for (const auto& [name, tensor] : graph_.initializers) {
    int slot = SlotOf(name);
    if (!input_set.count(slot)) constant_slots_.emplace_back(slot, &tensor);
  }
  std::unordered_set<std::string> outer(outer_scope.begin(), outer_scope.end());
  for (const std::string& name : graph_.OuterScopeValues()) {
    if (!outer.count(name)) {
      return InvalidArgument("graph '{}' uses value '{}' that is never defined", graph_.name, name);
    }
    outer_slots_.push_back(SlotOf(name));
  }
  return Status::Ok();
}

Status GraphExecutor::BuildSteps() {
  // Subgraphs never plan memory: their runs are nested in a step of the enclosing run.
  ExecutorOptions sub_options = options_;
  sub_options.plan_memory = false;
  SubgraphFactory make_subgraph = [&model = model_, provider = provider_,
                                   sub_options](const Graph& sub) {
    return GraphExecutor::Create(sub, model, provider, sub_options, sub.OuterScopeValues());
  };
  for (const auto& node_ptr : graph_.nodes) {
    ASSIGN_OR_RETURN(Step step, MakeStep(*node_ptr, make_subgraph));
    steps_.push_back(std::move(step));
  }
  return Status::Ok();
}

StatusOr<GraphExecutor::Step> GraphExecutor::MakeStep(const Node& node,
                                                      const SubgraphFactory& make_subgraph) {
  int64_t opset = model_.OpsetFor(node.domain);
  if (opset == 0 && !node.domain.empty() && node.domain != "ai.onnx") opset = 1;
  std::vector<DataType> types;
  for (const auto& in : node.inputs) types.push_back(graph_.ValueType(in));
  ASSIGN_OR_RETURN(const KernelDef* def, provider_->Registry().Find(node, opset, types));
  KernelInfo info(node, opset, graph_, options_.num_threads, make_subgraph);
  info.set_batch_invariant_matmul(options_.batch_invariant_matmul);
  Step step;
  step.node = &node;
  StatusOr<std::unique_ptr<OpKernel>> kernel = [&]() -> StatusOr<std::unique_ptr<OpKernel>> {
    try {
      return def->factory(info);
    } catch (const std::exception& e) {
      return Internal("{}", e.what());
    }
  }();
  if (!kernel.ok()) return kernel.status().WithContext(node.Describe());
  step.kernel = std::move(kernel).value();
  for (size_t i = 0; i < node.inputs.size(); ++i) step.released.push_back(info.Released(i));
  for (const auto& in : node.inputs) step.inputs.push_back(in.empty() ? -1 : SlotOf(in));
  for (const auto& out : node.outputs) step.outputs.push_back(out.empty() ? -1 : SlotOf(out));
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    const int k = step.kernel->InPlaceInput(o);
    step.inplace_input.push_back(k >= 0 && static_cast<size_t>(k) < step.inputs.size() ? k : -1);
  }
  return step;
}

Status GraphExecutor::BindOutputs() {
  for (const ValueInfo& vi : graph_.outputs) {
    if (!slots_.count(vi.name)) {
      return InvalidArgument("graph output '{}' is never produced", vi.name);
    }
    output_slots_.push_back(slots_.at(vi.name));
  }
  return Status::Ok();
}

void GraphExecutor::ReleaseConstants() {
  // An initializer every reader released (and no subgraph or graph output reads) is replaced by a
  // placeholder of the same type and shape; its owner may then free it.
  std::unordered_set<int> needed(output_slots_.begin(), output_slots_.end());
  for (const Step& step : steps_) {
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      if (step.inputs[i] >= 0 && !step.released[i]) needed.insert(step.inputs[i]);
    }
    for (const std::string& name : CapturedValues(*step.node)) {
      if (auto it = slots_.find(name); it != slots_.end()) needed.insert(it->second);
    }
  }
  for (auto& [slot, tensor] : constant_slots_) {
    if (needed.count(slot)) continue;
    placeholders_.push_back(Tensor::View(tensor->dtype(), tensor->shape(), nullptr));
    tensor = &placeholders_.back();
    releasable_.push_back(slot_names_[slot]);
  }
}

void GraphExecutor::PlanLifetimes() {
  // Values captured by subgraphs count as read by the node owning the subgraph.
  std::vector<StepValues> values(steps_.size());
  for (size_t s = 0; s < steps_.size(); ++s) {
    values[s].reads = steps_[s].inputs;
    for (const std::string& name : CapturedValues(*steps_[s].node)) {
      if (auto it = slots_.find(name); it != slots_.end()) values[s].reads.push_back(it->second);
    }
    values[s].writes = steps_[s].outputs;
  }
  Lifetimes lifetimes = ComputeLifetimes(values, slot_names_.size(), output_slots_);
  slot_last_step_ = std::move(lifetimes.last_step);
  for (size_t s = 0; s < steps_.size(); ++s) {
    steps_[s].release_after = std::move(lifetimes.release_after[s]);
  }
}

Status GraphExecutor::Run(std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
                          const ExecutionFrame* parent) const {
  if (inputs.size() != input_slots_.size()) {
    return InvalidArgument("graph '{}' expects {} inputs, got {}", graph_.name, input_slots_.size(),
                           inputs.size());
  }
  if (parent != nullptr || !options_.plan_memory) return RunSteps(inputs, outputs, parent, nullptr);
  ContextLease lease(*this);
  return RunSteps(inputs, outputs, parent, lease.get());
}

// The calling thread's intra-op thread count during a run, set through the provider only when a
// step needs another one, and num_threads again when the run ends (however it ends).
class GraphExecutor::StepThreads {
 public:
  StepThreads(const ExecutionProvider& provider, int num_threads)
      : provider_(provider), num_threads_(num_threads), current_(num_threads) {}
  ~StepThreads() { Set(num_threads_); }
  StepThreads(const StepThreads&) = delete;
  StepThreads& operator=(const StepThreads&) = delete;
  int Set(int threads) {
    if (threads != current_) provider_.SetIntraOpThreads(threads);
    current_ = threads;
    return threads;
  }

 private:
  const ExecutionProvider& provider_;
  const int num_threads_;
  int current_;
};

Status GraphExecutor::RunSteps(std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
                               const ExecutionFrame* parent, RunContext* context) const {
  Frame frame(slots_, slot_names_.size(), parent);
  RETURN_IF_ERROR(BindFrame(inputs, parent, &frame));
  RunMemory memory = BeginMemory(inputs, context, &frame);
  const bool profiling = profiling_.load(std::memory_order_relaxed);
  // Threads per step (ExecutorOptions::min_parallel_flops / bytes): planned runs follow what the
  // signature's recording run chose from the steps' costs; the recording run uses num_threads.
  const bool narrow = options_.num_threads > 1 &&
                      (options_.min_parallel_flops > 0 || options_.min_parallel_bytes > 0);
  const std::vector<int>* chosen =
      memory.entry != nullptr && !memory.entry->step_threads.empty() ? &memory.entry->step_threads
                                                                      : nullptr;
  const bool costing = profiling || (narrow && memory.recorder != nullptr);
  StepThreads threads(*provider_, options_.num_threads);
  std::vector<int64_t> step_ns(profiling ? steps_.size() : 0, 0);
  std::vector<NodeCost> step_cost(costing ? steps_.size() : 0);
  std::vector<int> step_threads(profiling ? steps_.size() : 0);
  std::vector<const Tensor*> in_ptrs;
  std::vector<Tensor> out_vals;
  for (size_t s = 0; s < steps_.size(); ++s) {
    const int t = threads.Set(chosen ? (*chosen)[s] : options_.num_threads);
    if (profiling) step_threads[s] = t;
    RETURN_IF_ERROR(RunStep(s, memory, &frame, t, profiling ? &step_ns[s] : nullptr,
                            costing ? &step_cost[s] : nullptr, in_ptrs, out_vals));
  }
  RETURN_IF_ERROR(CollectOutputs(frame, outputs));
  if (profiling) AddProfile(step_ns, step_cost, step_threads);
  if (memory.recorder != nullptr) {
    std::vector<int> choice;
    if (narrow) {
      choice.resize(steps_.size());
      for (size_t s = 0; s < steps_.size(); ++s) choice[s] = ThreadsFor(step_cost[s]);
    }
    FinishRecording(memory, context, std::move(choice));
  }
  return Status::Ok();
}

Status GraphExecutor::BindFrame(std::span<const Tensor> inputs, const ExecutionFrame* parent,
                                Frame* frame) const {
  for (const auto& [slot, tensor] : constant_slots_) frame->ptrs[slot] = tensor;
  for (size_t i = 0; i < inputs.size(); ++i) frame->ptrs[input_slots_[i]] = &inputs[i];
  for (int slot : outer_slots_) {
    const Tensor* t = parent ? parent->Lookup(slot_names_[slot]) : nullptr;
    if (t == nullptr) {
      return InvalidArgument("value '{}' captured by graph '{}' is not available",
                             slot_names_[slot], graph_.name);
    }
    frame->ptrs[slot] = t;
  }
  return Status::Ok();
}

GraphExecutor::RunMemory GraphExecutor::BeginMemory(std::span<const Tensor> inputs,
                                                    RunContext* context, Frame* frame) const {
  // Find the plan of this input signature, or record one.
  RunMemory memory;
  if (context == nullptr) return memory;
  for (const Tensor& t : inputs) {
    memory.signature.push_back(static_cast<int64_t>(t.dtype()));
    memory.signature.push_back(t.rank());
    memory.signature.insert(memory.signature.end(), t.shape().begin(), t.shape().end());
  }
  auto& plans = context->plans;
  for (auto it = plans.begin(); it != plans.end(); ++it) {
    if (it->signature == memory.signature) {
      plans.splice(plans.begin(), plans, it);
      memory.plan = it->memory;
      break;
    }
  }
  if (memory.plan && context->arena.Reserve(memory.plan->stats.arena_bytes)) {
    memory.entry = &plans.front();
    frame->mode = MemoryMode::kPlanned;
    frame->arena_base = context->arena.data();
    memory.arena = &context->arena;
    if (options_.poison_arena) std::memset(frame->arena_base, 0xFF, memory.plan->stats.arena_bytes);
  } else if (!memory.plan) {
    frame->mode = MemoryMode::kRecord;
    memory.recorder = &context->recording;
    memory.recorder->Reset(steps_.size());
  }
  return memory;
}

Status GraphExecutor::RunStep(size_t s, const RunMemory& memory, Frame* frame, int threads,
                              int64_t* ns, NodeCost* cost, std::vector<const Tensor*>& in_ptrs,
                              std::vector<Tensor>& out_vals) const {
  const Step& step = steps_[s];
  in_ptrs.assign(step.inputs.size(), nullptr);
  for (size_t i = 0; i < step.inputs.size(); ++i) {
    int slot = step.inputs[i];
    if (slot < 0) continue;
    in_ptrs[i] = frame->ptrs[slot];
    if (in_ptrs[i] == nullptr) {
      return Internal("{}: input '{}' has no value", step.node->Describe(), slot_names_[slot]);
    }
  }
  out_vals.assign(step.outputs.size(), Tensor());
  frame->own.assign(step.outputs.size(), nullptr);
  if (memory.plan) frame->planned_outs = memory.plan->outputs[s];
  KernelContext ctx(*step.node, in_ptrs, out_vals, frame, threads);
  const auto start = ns ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  Status st;
  try {
    st = step.kernel->Compute(ctx);
  } catch (const std::exception& e) {
    st = Internal("{}", e.what());
  }
  if (ns) {
    *ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                               start)
              .count();
  }
  if (!st.ok()) return st.WithContext(step.node->Describe());
  if (cost) *cost = StepCost(*step.node, in_ptrs, out_vals);
  if (memory.recorder) memory.recorder->BeginStep(static_cast<int>(s), step.outputs.size());
  for (size_t o = 0; o < step.outputs.size(); ++o) {
    RETURN_IF_ERROR(StoreOutput(s, o, memory, in_ptrs, out_vals[o], frame));
  }
  for (int slot : step.release_after) {
    frame->values[slot] = Tensor();
    frame->ptrs[slot] = nullptr;
  }
  return Status::Ok();
}

Status GraphExecutor::StoreOutput(size_t s, size_t o, const RunMemory& memory,
                                  std::span<const Tensor* const> in_ptrs, Tensor& out,
                                  Frame* frame) const {
  const Step& step = steps_[s];
  const int slot = step.outputs[o];
  if (slot < 0) return Status::Ok();
  if (!out.defined()) {
    return Internal("{} did not produce output '{}'", step.node->Describe(), slot_names_[slot]);
  }
  const void* p = out.raw_data();
  if (memory.arena && p != frame->own[o] && memory.arena->Contains(p)) {
    const int64_t offset = static_cast<const char*>(p) - memory.arena->data();
    // A view the plan does not know: its buffer may be reused.
    if (!memory.plan->outputs[s][o].AllowsView(offset)) out = out.Clone();
  }
  if (memory.recorder && p != nullptr && out.ByteSize() > 0) {
    const int last = slot_last_step_[slot];
    if (p != frame->own[o]) {
      memory.recorder->RecordView(static_cast<int>(s), static_cast<int>(o), p, last);
    } else if (last < static_cast<int>(steps_.size())) {  // graph outputs stay on the heap
      memory.recorder->RecordAllocated(static_cast<int>(s), static_cast<int>(o), p,
                                       out.ByteSize(), last, in_ptrs, step.inplace_input[o]);
    }
  }
  frame->values[slot] = std::move(out);
  frame->ptrs[slot] = &frame->values[slot];
  return Status::Ok();
}

Status GraphExecutor::CollectOutputs(const Frame& frame, std::vector<Tensor>* outputs) const {
  outputs->clear();
  outputs->reserve(output_slots_.size());
  for (int slot : output_slots_) {
    const Tensor* t = frame.ptrs[slot];
    if (t == nullptr) return Internal("graph output '{}' has no value", slot_names_[slot]);
    // Outputs never alias caller inputs, weights, parent frames or the arena: copy those.
    bool produced_here = t == &frame.values[slot];
    outputs->push_back(produced_here && t->owns_data() ? *t : t->Clone());
  }
  return Status::Ok();
}

void GraphExecutor::AddProfile(const std::vector<int64_t>& step_ns,
                               const std::vector<NodeCost>& step_cost,
                               const std::vector<int>& step_threads) const {
  MutexLock lock(&profile_mu_);
  for (size_t s = 0; s < steps_.size(); ++s) {
    StepProfile& p = profile_[s];
    p.calls += 1;
    p.ns += step_ns[s];
    p.flops += step_cost[s].flops;
    p.bytes += step_cost[s].bytes;
    p.last = step_cost[s];
    p.threads = step_threads[s];
  }
}

int GraphExecutor::ThreadsFor(const NodeCost& cost) const {
  // No figure (control flow: its subgraphs' work is unknown here): as before, every thread.
  const bool large = cost.bound == CostBound::kNone ||
                     cost.flops >= options_.min_parallel_flops ||
                     cost.bytes >= options_.min_parallel_bytes;
  return large ? options_.num_threads : 1;
}

void GraphExecutor::FinishRecording(RunMemory& memory, RunContext* context,
                                    std::vector<int> step_threads) const {
  auto plan = std::make_shared<const MemoryPlan>(memory.recorder->Build(Arena::kAlignment));
  auto& plans = context->plans;
  plans.push_front(CachedPlan{std::move(memory.signature), plan, std::move(step_threads)});
  while (plans.size() > std::max<size_t>(options_.max_cached_plans, 1)) plans.pop_back();
  plans_recorded_.fetch_add(1, std::memory_order_relaxed);
  MutexLock lock(&pool_mu_);
  last_stats_ = plan->stats;
}

MemoryPlanStats GraphExecutor::memory_stats() const {
  MutexLock lock(&pool_mu_);
  return last_stats_;
}

std::vector<NodeProfile> GraphExecutor::Profile() const {
  MutexLock lock(&profile_mu_);
  std::vector<NodeProfile> r;
  r.reserve(steps_.size());
  for (size_t s = 0; s < steps_.size(); ++s) {
    const StepProfile& p = profile_[s];
    r.push_back({steps_[s].node->name, steps_[s].node->op_type, p.calls,
                 static_cast<double>(p.ns) / 1e6, p.flops, p.bytes, p.last.bound, p.last.int8,
                 p.threads});
  }
  return r;
}

void GraphExecutor::ResetProfile() const {
  MutexLock lock(&profile_mu_);
  std::fill(profile_.begin(), profile_.end(), StepProfile{});
}

}  // namespace inferd
