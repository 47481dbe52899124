#include "kernels/cpu/util/string_index.h"

#include <algorithm>
#include <string>

namespace inferd::cpu {
namespace {

class StringIndexKernel final : public OpKernel {
 public:
  StringIndexKernel(std::unique_ptr<OpKernel> numeric, std::vector<int> data_inputs)
      : numeric_(std::move(numeric)), data_inputs_(std::move(data_inputs)) {}

  Status Compute(KernelContext& ctx) const override {
    bool any_string = false;
    for (size_t i = 0; i < ctx.NumInputs(); ++i) {
      const Tensor* t = ctx.Input(i);
      any_string = any_string || (t != nullptr && t->is_string() && IsData(i));
    }
    if (!any_string) return numeric_->Compute(ctx);

    // Replace each string data input by the global numbers of its elements.
    std::vector<const Tensor*> inputs(ctx.NumInputs());
    std::vector<Tensor> numbers;
    numbers.reserve(ctx.NumInputs());  // stable addresses for `inputs`
    std::vector<const std::string*> table;
    for (size_t i = 0; i < ctx.NumInputs(); ++i) {
      const Tensor* t = ctx.Input(i);
      inputs[i] = t;
      if (t == nullptr || !t->is_string() || !IsData(i)) continue;
      Tensor idx = Tensor::Allocate(DataType::kInt64, t->shape());
      const std::string* s = t->data<std::string>();
      for (int64_t k = 0; k < t->NumElements(); ++k) {
        idx.data<int64_t>()[k] = static_cast<int64_t>(table.size());
        table.push_back(s + k);
      }
      numbers.push_back(std::move(idx));
      inputs[i] = &numbers.back();
    }
    std::vector<Tensor> outs(ctx.NumOutputs());
    KernelContext sub(ctx.node(), inputs, outs, /*frame=*/nullptr, ctx.num_threads());
    RETURN_IF_ERROR(numeric_->Compute(sub));
    for (size_t o = 0; o < outs.size(); ++o) RETURN_IF_ERROR(MapBack(outs[o], table, o, ctx));
    return Status::Ok();
  }

 private:
  bool IsData(size_t i) const {
    return data_inputs_.empty() ||
           std::find(data_inputs_.begin(), data_inputs_.end(), static_cast<int>(i)) !=
               data_inputs_.end();
  }

  // Output o of the numeric run: element numbers become the strings they name.
  static Status MapBack(const Tensor& numbers, const std::vector<const std::string*>& table,
                        size_t o, KernelContext& ctx) {
    if (!numbers.defined()) return Status::Ok();
    if (numbers.dtype() != DataType::kInt64) {  // not an element output (a mask, a count)
      ctx.SetOutput(o, numbers);
      return Status::Ok();
    }
    Tensor* out = ctx.AllocateOutput(o, DataType::kString, numbers.shape());
    std::string* dst = out->data<std::string>();
    const int64_t* idx = numbers.data<int64_t>();
    for (int64_t j = 0; j < numbers.NumElements(); ++j) {
      if (idx[j] < 0 || idx[j] >= static_cast<int64_t>(table.size())) {
        return Internal("{}: string output {} names no input element", ctx.node().Describe(), o);
      }
      dst[j] = *table[static_cast<size_t>(idx[j])];
    }
    return Status::Ok();
  }

  std::unique_ptr<OpKernel> numeric_;
  std::vector<int> data_inputs_;
};

}  // namespace

KernelFactory OnStringIndices(KernelFactory numeric, std::vector<int> data_inputs) {
  return [numeric = std::move(numeric), data_inputs = std::move(data_inputs)](
             const KernelInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
    ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> inner, numeric(info));
    return std::unique_ptr<OpKernel>(
        std::make_unique<StringIndexKernel>(std::move(inner), data_inputs));
  };
}

std::vector<DataType> WithString(std::vector<DataType> types) {
  types.push_back(DataType::kString);
  return types;
}

}  // namespace inferd::cpu
