// Control flow: If, Loop, Scan (opset 8 and 9+). Bodies are GraphExecutors built once in Init; values the bodies
// capture from enclosing graphs are resolved by the executor through the KernelContext's frame.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/register.h"
#include "kernels/cpu/util/kernel_util.h"
#include "runtime/graph_executor.h"

namespace inferd::cpu {
namespace {

StatusOr<std::shared_ptr<GraphExecutor>> BuildBody(const KernelInfo& info, const char* attr) {
  std::shared_ptr<Graph> g = info.node().GetGraph(attr);
  if (!g) return InvalidArgument("{} needs a graph attribute '{}'", info.node().op_type, attr);
  return info.CreateSubgraph(*g);
}

StatusOr<bool> ReadCondition(const Tensor& t, const char* what) {
  if (t.NumElements() != 1) {
    return InvalidArgument("{} must hold exactly one element, got {}", what, t.DebugString());
  }
  return t.GetAsDouble(0) != 0.0;
}

// Copies slice `index` along `axis` of `in` into a new tensor whose shape drops `axis`.
Tensor SliceAlong(const Tensor& in, int64_t axis, int64_t index) {
  Shape shape = in.shape();
  int64_t count = shape[axis];
  shape.erase(shape.begin() + axis);
  Tensor out = Tensor::Allocate(in.dtype(), shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= in.dim(d);
  for (int64_t d = axis + 1; d < in.rank(); ++d) inner *= in.dim(d);
  size_t bytes = static_cast<size_t>(inner) * SizeOf(in.dtype());
  const char* src = static_cast<const char*>(in.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(dst + o * bytes, src + (o * count + index) * bytes, bytes);
  }
  return out;
}

// Stacks equally shaped `parts` along a new axis `axis` (parts[i] becomes index i, or
// parts.size()-1-i when `reverse`). `fallback_type` is used when there are no parts.
StatusOr<Tensor> StackAlong(const std::vector<Tensor>& parts, int64_t axis, bool reverse,
                            const std::string& what) {
  if (parts.empty()) return InvalidArgument("no parts to stack for {}", what);
  const Shape& part_shape = parts[0].shape();
  for (const Tensor& p : parts) {
    if (p.shape() != part_shape || p.dtype() != parts[0].dtype()) {
      return InvalidArgument("{}: per-iteration values differ in type or shape ({} vs {})", what,
                             parts[0].DebugString(), p.DebugString());
    }
  }
  int64_t rank = static_cast<int64_t>(part_shape.size()) + 1;
  ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(axis, rank));
  Shape shape = part_shape;
  int64_t count = static_cast<int64_t>(parts.size());
  shape.insert(shape.begin() + a, count);
  Tensor out = Tensor::Allocate(parts[0].dtype(), shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < a; ++d) outer *= shape[d];
  for (int64_t d = a + 1; d < rank; ++d) inner *= shape[d];
  size_t bytes = static_cast<size_t>(inner) * SizeOf(out.dtype());
  char* dst = static_cast<char*>(out.raw_data());
  for (int64_t i = 0; i < count; ++i) {
    const char* src = static_cast<const char*>(parts[reverse ? count - 1 - i : i].raw_data());
    for (int64_t o = 0; o < outer; ++o) {
      std::memcpy(dst + (o * count + i) * bytes, src + o * bytes, bytes);
    }
  }
  return out;
}

// Element type of a body output when the loop ran zero times (declared type, else float32).
DataType DeclaredOutputType(const Graph& body, size_t i) {
  DataType t = i < body.outputs.size() ? body.outputs[i].dtype : DataType::kUndefined;
  return t == DataType::kUndefined ? DataType::kFloat32 : t;
}

class IfKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    ASSIGN_OR_RETURN(then_, BuildBody(info, "then_branch"));
    ASSIGN_OR_RETURN(else_, BuildBody(info, "else_branch"));
    if (then_->graph().outputs.size() != else_->graph().outputs.size()) {
      return InvalidArgument("If branches have different output counts ({} vs {})",
                             then_->graph().outputs.size(), else_->graph().outputs.size());
    }
    if (!then_->graph().inputs.empty() || !else_->graph().inputs.empty()) {
      return InvalidArgument("If branches must not declare inputs");
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* cond = ctx.Input(0);
    if (cond == nullptr) return InvalidArgument("If needs a condition input");
    ASSIGN_OR_RETURN(bool c, ReadCondition(*cond, "If condition"));
    const GraphExecutor& branch = c ? *then_ : *else_;
    std::vector<Tensor> outs;
    RETURN_IF_ERROR(ctx.RunSubgraph(branch, {}, &outs).WithContext(c ? "then_branch" : "else_branch"));
    if (outs.size() < ctx.NumOutputs()) {
      return InvalidArgument("If branch produced {} outputs, node has {}", outs.size(),
                             ctx.NumOutputs());
    }
    for (size_t i = 0; i < ctx.NumOutputs(); ++i) ctx.SetOutput(i, std::move(outs[i]));
    return Status::Ok();
  }

 private:
  std::shared_ptr<GraphExecutor> then_, else_;
};

// Loop(M?, cond?, v_initial...) with body(iteration_num, cond, v...) -> (cond, v..., scan...).
class LoopKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    ASSIGN_OR_RETURN(body_, BuildBody(info, "body"));
    const Graph& g = body_->graph();
    if (info.NumInputs() < 2) return InvalidArgument("Loop needs inputs M and cond (may be empty)");
    num_carried_ = static_cast<int64_t>(info.NumInputs()) - 2;
    if (static_cast<int64_t>(g.inputs.size()) != num_carried_ + 2) {
      return InvalidArgument("Loop body has {} inputs, expected {} (iteration, cond, {} carried)",
                             g.inputs.size(), num_carried_ + 2, num_carried_);
    }
    if (static_cast<int64_t>(g.outputs.size()) < num_carried_ + 1) {
      return InvalidArgument("Loop body has {} outputs, expected at least {}", g.outputs.size(),
                             num_carried_ + 1);
    }
    num_scan_ = static_cast<int64_t>(g.outputs.size()) - 1 - num_carried_;
    if (static_cast<int64_t>(info.NumOutputs()) > num_carried_ + num_scan_) {
      return InvalidArgument("Loop has {} outputs but its body yields only {}", info.NumOutputs(),
                             num_carried_ + num_scan_);
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* m = ctx.Input(0);
    const Tensor* c = ctx.Input(1);
    int64_t max_trips = -1;  // unbounded
    if (m != nullptr) {
      if (m->NumElements() != 1) return InvalidArgument("Loop M must be a scalar");
      max_trips = m->GetAsInt64(0);
    }
    bool cond = true;
    if (c != nullptr) {
      ASSIGN_OR_RETURN(cond, ReadCondition(*c, "Loop cond"));
    }
    if (m == nullptr && c == nullptr) {
      return InvalidArgument("Loop with neither M nor cond would never terminate");
    }

    std::vector<Tensor> feeds(num_carried_ + 2);
    for (int64_t i = 0; i < num_carried_; ++i) {
      const Tensor* v = ctx.Input(2 + i);
      if (v == nullptr) return InvalidArgument("Loop carried input {} is missing", i);
      feeds[2 + i] = *v;
    }
    std::vector<std::vector<Tensor>> scans(num_scan_);
    std::vector<Tensor> outs;
    int64_t iter = 0;
    for (; (max_trips < 0 || iter < max_trips) && cond; ++iter) {
      feeds[0] = Tensor::Scalar<int64_t>(iter);
      feeds[1] = Tensor::Scalar<bool>(cond);
      RETURN_IF_ERROR(ctx.RunSubgraph(*body_, feeds, &outs)
                          .WithContext(fmt::format("Loop body iteration {}", iter)));
      ASSIGN_OR_RETURN(cond, ReadCondition(outs[0], "Loop body condition output"));
      for (int64_t i = 0; i < num_carried_; ++i) feeds[2 + i] = std::move(outs[1 + i]);
      for (int64_t k = 0; k < num_scan_; ++k) scans[k].push_back(std::move(outs[1 + num_carried_ + k]));
    }
    for (int64_t i = 0; i < num_carried_ && i < static_cast<int64_t>(ctx.NumOutputs()); ++i) {
      ctx.SetOutput(i, feeds[2 + i]);
    }
    for (int64_t k = 0; k < num_scan_; ++k) {
      size_t o = static_cast<size_t>(num_carried_ + k);
      if (o >= ctx.NumOutputs()) break;
      if (scans[k].empty()) {
        ctx.AllocateOutput(o, DeclaredOutputType(body_->graph(), 1 + num_carried_ + k), {0});
        continue;
      }
      ASSIGN_OR_RETURN(Tensor stacked, StackAlong(scans[k], 0, false, "Loop scan output"));
      ctx.SetOutput(o, std::move(stacked));
    }
    return Status::Ok();
  }

 private:
  std::shared_ptr<GraphExecutor> body_;
  int64_t num_carried_ = 0;
  int64_t num_scan_ = 0;
};

// Scan (opset 9+): N state variables then M scan inputs; body(states..., slices...) ->
// (states..., scan output slices...).
class ScanKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    ASSIGN_OR_RETURN(body_, BuildBody(info, "body"));
    const Node& n = info.node();
    num_scan_in_ = n.GetInt("num_scan_inputs", -1);
    int64_t num_inputs = static_cast<int64_t>(info.NumInputs());
    if (num_scan_in_ < 1 || num_scan_in_ > num_inputs) {
      return InvalidArgument("Scan num_scan_inputs {} is invalid for {} inputs", num_scan_in_,
                             num_inputs);
    }
    num_state_ = num_inputs - num_scan_in_;
    const Graph& g = body_->graph();
    if (static_cast<int64_t>(g.inputs.size()) != num_inputs) {
      return InvalidArgument("Scan body has {} inputs, expected {}", g.inputs.size(), num_inputs);
    }
    num_scan_out_ = static_cast<int64_t>(g.outputs.size()) - num_state_;
    if (num_scan_out_ < 0 || static_cast<int64_t>(info.NumOutputs()) > num_state_ + num_scan_out_) {
      return InvalidArgument("Scan body has {} outputs, node has {} outputs and {} states",
                             g.outputs.size(), info.NumOutputs(), num_state_);
    }
    in_dirs_ = n.GetInts("scan_input_directions", std::vector<int64_t>(num_scan_in_, 0));
    in_axes_ = n.GetInts("scan_input_axes", std::vector<int64_t>(num_scan_in_, 0));
    out_dirs_ = n.GetInts("scan_output_directions", std::vector<int64_t>(num_scan_out_, 0));
    out_axes_ = n.GetInts("scan_output_axes", std::vector<int64_t>(num_scan_out_, 0));
    if (static_cast<int64_t>(in_dirs_.size()) != num_scan_in_ ||
        static_cast<int64_t>(in_axes_.size()) != num_scan_in_ ||
        static_cast<int64_t>(out_dirs_.size()) != num_scan_out_ ||
        static_cast<int64_t>(out_axes_.size()) != num_scan_out_) {
      return InvalidArgument("Scan direction/axis attributes have the wrong length");
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    std::vector<Tensor> feeds(num_state_ + num_scan_in_);
    for (int64_t i = 0; i < num_state_; ++i) {
      if (ctx.Input(i) == nullptr) return InvalidArgument("Scan state input {} is missing", i);
      feeds[i] = *ctx.Input(i);
    }
    int64_t seq_len = -1;
    std::vector<int64_t> axes(num_scan_in_);
    for (int64_t j = 0; j < num_scan_in_; ++j) {
      const Tensor* in = ctx.Input(num_state_ + j);
      if (in == nullptr) return InvalidArgument("Scan input {} is missing", j);
      if (in->rank() < 1) return InvalidArgument("Scan input {} must have rank >= 1", j);
      ASSIGN_OR_RETURN(axes[j], NormalizeAxis(in_axes_[j], in->rank()));
      int64_t len = in->dim(axes[j]);
      if (seq_len >= 0 && len != seq_len) {
        return InvalidArgument("Scan inputs have different sequence lengths ({} vs {})", seq_len,
                               len);
      }
      seq_len = len;
    }
    std::vector<std::vector<Tensor>> scans(num_scan_out_);
    std::vector<Tensor> outs;
    for (int64_t t = 0; t < seq_len; ++t) {
      for (int64_t j = 0; j < num_scan_in_; ++j) {
        int64_t idx = in_dirs_[j] ? seq_len - 1 - t : t;
        feeds[num_state_ + j] = SliceAlong(*ctx.Input(num_state_ + j), axes[j], idx);
      }
      RETURN_IF_ERROR(ctx.RunSubgraph(*body_, feeds, &outs)
                          .WithContext(fmt::format("Scan body iteration {}", t)));
      for (int64_t i = 0; i < num_state_; ++i) feeds[i] = std::move(outs[i]);
      for (int64_t k = 0; k < num_scan_out_; ++k) scans[k].push_back(std::move(outs[num_state_ + k]));
    }
    for (int64_t i = 0; i < num_state_ && i < static_cast<int64_t>(ctx.NumOutputs()); ++i) {
      ctx.SetOutput(i, feeds[i]);
    }
    for (int64_t k = 0; k < num_scan_out_; ++k) {
      size_t o = static_cast<size_t>(num_state_ + k);
      if (o >= ctx.NumOutputs()) break;
      if (scans[k].empty()) {
        ctx.AllocateOutput(o, DeclaredOutputType(body_->graph(), o), {0});
        continue;
      }
      ASSIGN_OR_RETURN(Tensor stacked,
                       StackAlong(scans[k], out_axes_[k], out_dirs_[k] != 0, "Scan output"));
      ctx.SetOutput(o, std::move(stacked));
    }
    return Status::Ok();
  }

 private:
  std::shared_ptr<GraphExecutor> body_;
  int64_t num_state_ = 0, num_scan_in_ = 0, num_scan_out_ = 0;
  std::vector<int64_t> in_dirs_, in_axes_, out_dirs_, out_axes_;
};

// Scan opset 8: optional sequence_lens, then states and scan inputs that all carry a leading batch
// axis; scan inputs are [batch, seq, ...]. Each batch entry is scanned on its own; scan outputs
// shorter than the longest sequence are zero-padded.
class Scan8Kernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    ASSIGN_OR_RETURN(body_, BuildBody(info, "body"));
    const Node& n = info.node();
    num_scan_in_ = n.GetInt("num_scan_inputs", -1);
    int64_t num_inputs = static_cast<int64_t>(info.NumInputs()) - 1;  // minus sequence_lens
    if (num_scan_in_ < 1 || num_scan_in_ > num_inputs) {
      return InvalidArgument("Scan num_scan_inputs {} is invalid for {} inputs", num_scan_in_,
                             num_inputs);
    }
    num_state_ = num_inputs - num_scan_in_;
    const Graph& g = body_->graph();
    if (static_cast<int64_t>(g.inputs.size()) != num_inputs) {
      return InvalidArgument("Scan body has {} inputs, expected {}", g.inputs.size(), num_inputs);
    }
    num_scan_out_ = static_cast<int64_t>(g.outputs.size()) - num_state_;
    if (num_scan_out_ < 0) return InvalidArgument("Scan body has too few outputs");
    dirs_ = n.GetInts("directions", std::vector<int64_t>(num_scan_in_, 0));
    if (static_cast<int64_t>(dirs_.size()) != num_scan_in_) {
      return InvalidArgument("Scan directions must have {} entries", num_scan_in_);
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    int64_t batch = -1, seq = -1;
    for (int64_t i = 0; i < num_state_ + num_scan_in_; ++i) {
      const Tensor* t = ctx.Input(1 + i);
      bool scan = i >= num_state_;
      if (t == nullptr || t->rank() < (scan ? 2 : 1)) {
        return InvalidArgument("Scan input {} is missing or lacks batch{} axes", i, scan ? "/sequence" : "");
      }
      if (batch >= 0 && t->dim(0) != batch) return InvalidArgument("Scan inputs differ in batch size");
      batch = t->dim(0);
      if (scan) {
        if (seq >= 0 && t->dim(1) != seq) return InvalidArgument("Scan inputs differ in length");
        seq = t->dim(1);
      }
    }
    std::vector<int64_t> lens(batch, seq);
    if (const Tensor* sl = ctx.Input(0)) {
      if (sl->NumElements() != batch) return InvalidArgument("Scan sequence_lens needs {} values", batch);
      for (int64_t b = 0; b < batch; ++b) {
        lens[b] = sl->GetAsInt64(b);
        if (lens[b] < 0 || lens[b] > seq) return InvalidArgument("Scan sequence length {} out of range", lens[b]);
      }
    }
    std::vector<std::vector<Tensor>> states(num_state_), scans(num_scan_out_);
    std::vector<Tensor> feeds(num_state_ + num_scan_in_), outs;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < num_state_; ++i) feeds[i] = SliceAlong(*ctx.Input(1 + i), 0, b);
      std::vector<Tensor> seqs;
      for (int64_t j = 0; j < num_scan_in_; ++j) {
        seqs.push_back(SliceAlong(*ctx.Input(1 + num_state_ + j), 0, b));
      }
      std::vector<std::vector<Tensor>> steps(num_scan_out_);
      for (int64_t t = 0; t < lens[b]; ++t) {
        for (int64_t j = 0; j < num_scan_in_; ++j) {
          feeds[num_state_ + j] = SliceAlong(seqs[j], 0, dirs_[j] ? lens[b] - 1 - t : t);
        }
        RETURN_IF_ERROR(ctx.RunSubgraph(*body_, feeds, &outs).WithContext("Scan body"));
        for (int64_t i = 0; i < num_state_; ++i) feeds[i] = std::move(outs[i]);
        for (int64_t k = 0; k < num_scan_out_; ++k) steps[k].push_back(std::move(outs[num_state_ + k]));
      }
      for (int64_t i = 0; i < num_state_; ++i) states[i].push_back(feeds[i]);
      for (int64_t k = 0; k < num_scan_out_; ++k) {
        if (steps[k].empty()) return Unimplemented("Scan with an empty sequence");
        while (static_cast<int64_t>(steps[k].size()) < seq) {
          steps[k].push_back(Tensor::Allocate(steps[k][0].dtype(), steps[k][0].shape()));
        }
        ASSIGN_OR_RETURN(Tensor stacked, StackAlong(steps[k], 0, false, "Scan output"));
        scans[k].push_back(std::move(stacked));
      }
    }
    for (int64_t i = 0; i < num_state_ + num_scan_out_; ++i) {
      if (i >= static_cast<int64_t>(ctx.NumOutputs())) break;
      const auto& parts = i < num_state_ ? states[i] : scans[i - num_state_];
      ASSIGN_OR_RETURN(Tensor stacked, StackAlong(parts, 0, false, "Scan output"));
      ctx.SetOutput(i, std::move(stacked));
    }
    return Status::Ok();
  }

 private:
  std::shared_ptr<GraphExecutor> body_;
  int64_t num_state_ = 0, num_scan_in_ = 0, num_scan_out_ = 0;
  std::vector<int64_t> dirs_;
};

}  // namespace

void RegisterControlFlowKernels(KernelRegistry& r) {
  r.Add("If", 1, kOpsetMax, {}, MakeKernel<IfKernel>());
  r.Add("Loop", 1, kOpsetMax, {}, MakeKernel<LoopKernel>());
  r.Add("Scan", 8, 8, {}, MakeKernel<Scan8Kernel>());
  r.Add("Scan", 9, kOpsetMax, {}, MakeKernel<ScanKernel>());
}

}  // namespace inferd::cpu
