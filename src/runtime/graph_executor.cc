#include "runtime/graph_executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <list>
#include <unordered_set>

#include "runtime/arena.h"
#include "runtime/memory_planner.h"

namespace inferd {
namespace {

// Where one step output lives in a planned run.
struct PlannedOut {
  int64_t offset = -1;  // -1: heap
  size_t bytes = 0;
  // For outputs recorded as views of a planned buffer (Reshape, Identity, ...): the range they may
  // point into. Any other arena pointer in an output is unexpected and gets copied to the heap.
  int64_t alias_begin = -1;
  int64_t alias_end = -1;
  bool in_place = false;  // shares the buffer of an input that dies at this step
};

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

class Frame final : public ExecutionFrame {
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
      const PlannedOut& po = planned_outs[i];
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
  std::span<const PlannedOut> planned_outs;
  mutable std::vector<const void*> own;  // per output: the storage AllocateOutput handed out
};

// What the recording run of a new signature learns: every heap buffer a step output got from
// AllocateOutput, and which outputs are views into one of them.
struct Recording {
  struct Buffer {
    const char* ptr;
    size_t bytes;
    int first, last;
    int root;  // itself, or the buffer whose storage this in-place output takes over
  };
  std::vector<Buffer> buffers;

  // Buffer b must stay intact until step `last`; so must the storage it shares.
  void Extend(int b, int last) {
    buffers[b].last = std::max(buffers[b].last, last);
    Buffer& r = buffers[buffers[b].root];
    r.last = std::max(r.last, last);
  }
  std::vector<std::vector<int>> own;    // [step][output] -> buffer or -1
  std::vector<std::vector<int>> alias;  // [step][output] -> buffer or -1

  // The newest buffer whose range holds p (a freed buffer's address may be reused by a newer one;
  // a stale match only lengthens a lifetime, which is safe).
  int Find(const void* p) const {
    const char* c = static_cast<const char*>(p);
    for (int b = static_cast<int>(buffers.size()) - 1; b >= 0; --b) {
      if (c >= buffers[b].ptr && c < buffers[b].ptr + buffers[b].bytes) return b;
    }
    return -1;
  }
};

}  // namespace

struct GraphExecutor::ExecutionPlan {
  std::vector<std::vector<PlannedOut>> outs;  // [step][output]
  MemoryPlanStats stats;
};

struct GraphExecutor::RunContext {
  Arena arena;
  // Most recently used first; at most ExecutorOptions::max_cached_plans entries.
  std::list<std::pair<std::vector<int64_t>, std::shared_ptr<const ExecutionPlan>>> plans;
  Recording recording;  // scratch for the recording run
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

  for (const ValueInfo& vi : graph.inputs) ex->input_slots_.push_back(ex->SlotOf(vi.name));
  std::unordered_set<int> input_set(ex->input_slots_.begin(), ex->input_slots_.end());
  for (const auto& [name, tensor] : graph.initializers) {
    int slot = ex->SlotOf(name);
    if (!input_set.count(slot)) ex->constant_slots_.emplace_back(slot, &tensor);
  }
  std::unordered_set<std::string> outer(outer_scope.begin(), outer_scope.end());
  for (const std::string& name : graph.OuterScopeValues()) {
    if (!outer.count(name)) {
      return InvalidArgument("graph '{}' uses value '{}' that is never defined", graph.name, name);
    }
    ex->outer_slots_.push_back(ex->SlotOf(name));
  }

  // Subgraphs never plan memory: their runs are nested in a step of the enclosing run.
  ExecutorOptions sub_options = options;
  sub_options.plan_memory = false;
  auto make_subgraph = [&model, provider,
                        sub_options](const Graph& sub) -> StatusOr<std::shared_ptr<GraphExecutor>> {
    return GraphExecutor::Create(sub, model, provider, sub_options, sub.OuterScopeValues());
  };

  for (const auto& node_ptr : graph.nodes) {
    const Node& node = *node_ptr;
    int64_t opset = model.OpsetFor(node.domain);
    if (opset == 0 && !node.domain.empty() && node.domain != "ai.onnx") opset = 1;
    std::vector<DataType> types;
    for (const auto& in : node.inputs) types.push_back(graph.ValueType(in));
    ASSIGN_OR_RETURN(const KernelDef* def, provider->Registry().Find(node, opset, types));
    KernelInfo info(node, opset, graph, options.num_threads, make_subgraph);
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
    for (const auto& in : node.inputs) step.inputs.push_back(in.empty() ? -1 : ex->SlotOf(in));
    for (const auto& out : node.outputs) step.outputs.push_back(out.empty() ? -1 : ex->SlotOf(out));
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const int k = step.kernel->InPlaceInput(o);
      step.inplace_input.push_back(k >= 0 && static_cast<size_t>(k) < step.inputs.size() ? k : -1);
    }
    ex->steps_.push_back(std::move(step));
  }
  for (const ValueInfo& vi : graph.outputs) {
    if (!ex->slots_.count(vi.name)) {
      return InvalidArgument("graph output '{}' is never produced", vi.name);
    }
    ex->output_slots_.push_back(ex->slots_.at(vi.name));
  }

  if (options.release_constants) {
    // An initializer every reader released (and no subgraph or graph output reads) is replaced by
    // a placeholder of the same type and shape; its owner may then free it.
    std::unordered_set<int> needed(ex->output_slots_.begin(), ex->output_slots_.end());
    for (const Step& step : ex->steps_) {
      for (size_t i = 0; i < step.inputs.size(); ++i) {
        if (step.inputs[i] >= 0 && !step.released[i]) needed.insert(step.inputs[i]);
      }
      for (const std::string& name : CapturedValues(*step.node)) {
        if (auto it = ex->slots_.find(name); it != ex->slots_.end()) needed.insert(it->second);
      }
    }
    for (auto& [slot, tensor] : ex->constant_slots_) {
      if (needed.count(slot)) continue;
      ex->placeholders_.push_back(Tensor::View(tensor->dtype(), tensor->shape(), nullptr));
      tensor = &ex->placeholders_.back();
      ex->releasable_.push_back(ex->slot_names_[slot]);
    }
  }

  // Lifetimes: a slot produced by a step is released after its last consumer, unless it is a graph
  // output. Slots that are inputs, constants or captured values are never released.
  std::vector<int> last_use(ex->slot_names_.size(), -1);
  for (size_t s = 0; s < ex->steps_.size(); ++s) {
    for (int slot : ex->steps_[s].inputs) {
      if (slot >= 0) last_use[slot] = static_cast<int>(s);
    }
    // Values captured by subgraphs count as used by the node owning the subgraph.
    for (const std::string& name : CapturedValues(*ex->steps_[s].node)) {
      auto it = ex->slots_.find(name);
      if (it != ex->slots_.end()) last_use[it->second] = static_cast<int>(s);
    }
  }
  std::unordered_set<int> keep(ex->output_slots_.begin(), ex->output_slots_.end());
  ex->slot_last_step_.assign(ex->slot_names_.size(), static_cast<int>(ex->steps_.size()));
  for (size_t s = 0; s < ex->steps_.size(); ++s) {
    for (int slot : ex->steps_[s].outputs) {
      if (slot < 0 || keep.count(slot)) continue;
      int lu = last_use[slot];
      int release = lu >= 0 ? lu : static_cast<int>(s);
      ex->steps_[release].release_after.push_back(slot);
      ex->slot_last_step_[slot] = release;
    }
  }
  {
    MutexLock lock(&ex->profile_mu_);  // not shared yet: for the analysis only
    ex->profile_.assign(ex->steps_.size(), {0, 0});
  }
  return ex;
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

Status GraphExecutor::RunSteps(std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
                               const ExecutionFrame* parent, RunContext* context) const {
  Frame frame(slots_, slot_names_.size(), parent);
  for (const auto& [slot, tensor] : constant_slots_) frame.ptrs[slot] = tensor;
  for (size_t i = 0; i < inputs.size(); ++i) frame.ptrs[input_slots_[i]] = &inputs[i];
  for (int slot : outer_slots_) {
    const Tensor* t = parent ? parent->Lookup(slot_names_[slot]) : nullptr;
    if (t == nullptr) {
      return InvalidArgument("value '{}' captured by graph '{}' is not available",
                             slot_names_[slot], graph_.name);
    }
    frame.ptrs[slot] = t;
  }

  // Memory: find the plan of this input signature, or record one.
  std::vector<int64_t> signature;
  std::shared_ptr<const ExecutionPlan> plan;
  Recording* rec = nullptr;
  if (context != nullptr) {
    for (const Tensor& t : inputs) {
      signature.push_back(static_cast<int64_t>(t.dtype()));
      signature.push_back(t.rank());
      signature.insert(signature.end(), t.shape().begin(), t.shape().end());
    }
    auto& plans = context->plans;
    for (auto it = plans.begin(); it != plans.end(); ++it) {
      if (it->first == signature) {
        plans.splice(plans.begin(), plans, it);
        plan = it->second;
        break;
      }
    }
    if (plan && context->arena.Reserve(plan->stats.arena_bytes)) {
      frame.mode = MemoryMode::kPlanned;
      frame.arena_base = context->arena.data();
      if (options_.poison_arena) std::memset(frame.arena_base, 0xFF, plan->stats.arena_bytes);
    } else if (!plan) {
      frame.mode = MemoryMode::kRecord;
      rec = &context->recording;
      rec->buffers.clear();
      rec->own.assign(steps_.size(), {});
      rec->alias.assign(steps_.size(), {});
    }
  }
  const Arena* arena = frame.mode == MemoryMode::kPlanned ? &context->arena : nullptr;
  const bool profiling = profiling_.load(std::memory_order_relaxed);
  std::vector<int64_t> step_ns(profiling ? steps_.size() : 0, 0);

  std::vector<const Tensor*> in_ptrs;
  std::vector<Tensor> out_vals;
  for (size_t s = 0; s < steps_.size(); ++s) {
    const Step& step = steps_[s];
    in_ptrs.assign(step.inputs.size(), nullptr);
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      int slot = step.inputs[i];
      if (slot < 0) continue;
      in_ptrs[i] = frame.ptrs[slot];
      if (in_ptrs[i] == nullptr) {
        return Internal("{}: input '{}' has no value", step.node->Describe(), slot_names_[slot]);
      }
    }
    out_vals.assign(step.outputs.size(), Tensor());
    frame.own.assign(step.outputs.size(), nullptr);
    if (plan) frame.planned_outs = plan->outs[s];
    KernelContext ctx(*step.node, in_ptrs, out_vals, &frame, options_.num_threads);
    const auto start =
        profiling ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    Status st;
    try {
      st = step.kernel->Compute(ctx);
    } catch (const std::exception& e) {
      st = Internal("{}", e.what());
    }
    if (profiling) {
      step_ns[s] = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count();
    }
    if (!st.ok()) return st.WithContext(step.node->Describe());
    if (rec) {
      rec->own[s].assign(step.outputs.size(), -1);
      rec->alias[s].assign(step.outputs.size(), -1);
    }
    for (size_t o = 0; o < step.outputs.size(); ++o) {
      int slot = step.outputs[o];
      if (slot < 0) continue;
      Tensor& out = out_vals[o];
      if (!out.defined()) {
        return Internal("{} did not produce output '{}'", step.node->Describe(), slot_names_[slot]);
      }
      const void* p = out.raw_data();
      if (arena && p != frame.own[o] && arena->Contains(p)) {
        const PlannedOut& po = plan->outs[s][o];
        const char* c = static_cast<const char*>(p);
        if (po.alias_begin < 0 || c < arena->data() + po.alias_begin ||
            c >= arena->data() + po.alias_end) {
          out = out.Clone();  // a view the plan does not know: its buffer may be reused
        }
      }
      if (rec && p != nullptr && out.ByteSize() > 0) {
        if (p == frame.own[o]) {
          if (slot_last_step_[slot] < static_cast<int>(steps_.size())) {  // not a graph output
            const int b = static_cast<int>(rec->buffers.size());
            rec->own[s][o] = b;
            rec->buffers.push_back({static_cast<const char*>(p), out.ByteSize(),
                                    static_cast<int>(s), slot_last_step_[slot], b});
            // In place: the input's whole buffer (and all it shares) dies at this step.
            if (const int k = step.inplace_input[o]; k >= 0 && in_ptrs[k] != nullptr) {
              const int in_b = rec->Find(in_ptrs[k]->raw_data());
              if (in_b >= 0 && in_b != b && rec->buffers[in_b].ptr == in_ptrs[k]->raw_data()) {
                const int root = rec->buffers[in_b].root;
                const Recording::Buffer& r = rec->buffers[root];
                // No other input of this step may read that storage while the output is written.
                bool shared = false;
                for (size_t j = 0; j < in_ptrs.size(); ++j) {
                  if (static_cast<int>(j) == k || in_ptrs[j] == nullptr) continue;
                  const int jb = rec->Find(in_ptrs[j]->raw_data());
                  if (jb >= 0 && rec->buffers[jb].root == root) shared = true;
                }
                if (!shared && r.last == static_cast<int>(s) && out.ByteSize() <= r.bytes) {
                  rec->buffers[b].root = root;
                  rec->Extend(b, slot_last_step_[slot]);
                }
              }
            }
          }
        } else if (int b = rec->Find(p); b >= 0) {
          rec->alias[s][o] = b;
          rec->Extend(b, slot_last_step_[slot]);
        }
      }
      frame.values[slot] = std::move(out);
      frame.ptrs[slot] = &frame.values[slot];
    }
    for (int slot : step.release_after) {
      frame.values[slot] = Tensor();
      frame.ptrs[slot] = nullptr;
    }
  }

  outputs->clear();
  outputs->reserve(output_slots_.size());
  for (int slot : output_slots_) {
    const Tensor* t = frame.ptrs[slot];
    if (t == nullptr) return Internal("graph output '{}' has no value", slot_names_[slot]);
    // Outputs never alias caller inputs, weights, parent frames or the arena: copy those.
    bool produced_here = t == &frame.values[slot];
    outputs->push_back(produced_here && t->owns_data() ? *t : t->Clone());
  }

  if (profiling) {
    MutexLock lock(&profile_mu_);
    for (size_t s = 0; s < steps_.size(); ++s) {
      profile_[s].first += 1;
      profile_[s].second += step_ns[s];
    }
  }

  if (rec) {
    // Plan the recorded buffers; aliases may point anywhere inside the buffer they view. An
    // in-place output has no request of its own: it lives at its root buffer's offset.
    std::vector<BufferRequest> requests;
    std::vector<int> request_of(rec->buffers.size(), -1);
    for (size_t b = 0; b < rec->buffers.size(); ++b) {
      const auto& buf = rec->buffers[b];
      if (buf.root != static_cast<int>(b)) continue;
      request_of[b] = static_cast<int>(requests.size());
      requests.push_back({buf.bytes, buf.first, buf.last});
    }
    MemoryPlan mp = PlanMemory(requests, Arena::kAlignment);
    auto offset_of = [&](int b) {
      return static_cast<int64_t>(mp.offsets[request_of[rec->buffers[b].root]]);
    };
    auto new_plan = std::make_shared<ExecutionPlan>();
    new_plan->outs.resize(steps_.size());
    for (size_t s = 0; s < steps_.size(); ++s) {
      new_plan->outs[s].resize(steps_[s].outputs.size());
      for (size_t o = 0; o < steps_[s].outputs.size(); ++o) {
        PlannedOut& po = new_plan->outs[s][o];
        if (int b = rec->own[s][o]; b >= 0) {
          po.offset = offset_of(b);
          po.bytes = rec->buffers[b].bytes;
          po.in_place = rec->buffers[b].root != b;
        }
        if (int b = rec->alias[s][o]; b >= 0) {
          po.alias_begin = offset_of(b);
          po.alias_end = po.alias_begin + static_cast<int64_t>(rec->buffers[b].bytes);
        }
      }
    }
    new_plan->stats = {mp.arena_bytes, mp.sum_bytes, requests.size()};
    auto& plans = context->plans;
    plans.emplace_front(std::move(signature), new_plan);
    while (plans.size() > std::max<size_t>(options_.max_cached_plans, 1)) plans.pop_back();
    MutexLock lock(&pool_mu_);
    last_stats_ = new_plan->stats;
  }
  return Status::Ok();
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
    r.push_back({steps_[s].node->name, steps_[s].node->op_type, profile_[s].first,
                 static_cast<double>(profile_[s].second) / 1e6});
  }
  return r;
}

void GraphExecutor::ResetProfile() const {
  MutexLock lock(&profile_mu_);
  std::fill(profile_.begin(), profile_.end(), std::pair<int64_t, int64_t>{0, 0});
}

}  // namespace inferd
