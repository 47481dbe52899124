// StringNormalizer (ai.onnx, opset 10): drops stopwords and changes case.
//
// Input [C] or [1, C]; output [C'] or [1, C'] with the survivors in order, or a single empty
// string ([1] / [1, 1]) when nothing survives, as the ONNX reference and ONNX Runtime do.
// Case mapping covers ASCII letters only; other bytes (UTF-8 sequences included) pass through
// unchanged, and case-insensitive stopword matching compares ASCII-lowercased text.
#include <algorithm>
#include <cctype>
#include <string>
#include <unordered_set>

#include "kernels/cpu/text/register.h"
#include "runtime/op_kernel.h"

namespace inferd::cpu {
namespace {

std::string AsciiCase(std::string s, bool upper) {
  for (char& c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x80) c = static_cast<char>(upper ? std::toupper(u) : std::tolower(u));
  }
  return s;
}

class StringNormalizerKernel final : public OpKernel {
 public:
  Status Init(const KernelInfo& info) override {
    const Node& n = info.node();
    const std::string action = n.GetString("case_change_action", "NONE");
    if (action == "LOWER") {
      action_ = Action::kLower;
    } else if (action == "UPPER") {
      action_ = Action::kUpper;
    } else if (action != "NONE") {
      return InvalidArgument(
          "StringNormalizer: case_change_action '{}' is not NONE, LOWER or UPPER", action);
    }
    case_sensitive_ = n.GetInt("is_case_sensitive", 0) != 0;
    if (const Attribute* a = n.FindAttribute("stopwords")) {
      for (const std::string& w : a->strings) {
        stopwords_.insert(case_sensitive_ ? w : AsciiCase(w, false));
      }
    }
    return Status::Ok();
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor* x = ctx.Input(0);
    if (x == nullptr || !x->is_string()) {
      return InvalidArgument("StringNormalizer needs a string input");
    }
    const bool two_d = x->rank() == 2;
    if (!(x->rank() == 1 || (two_d && x->dim(0) == 1))) {
      return InvalidArgument("StringNormalizer: input shape {} is not [C] or [1, C]",
                             ShapeToString(x->shape()));
    }
    std::vector<std::string> kept;
    for (const std::string& s : x->values<std::string>()) {
      if (stopwords_.count(case_sensitive_ ? s : AsciiCase(s, false)) > 0) continue;
      kept.push_back(action_ == Action::kNone ? s : AsciiCase(s, action_ == Action::kUpper));
    }
    if (kept.empty()) kept.emplace_back();
    const int64_t c = static_cast<int64_t>(kept.size());
    Tensor* out = ctx.AllocateOutput(0, DataType::kString, two_d ? Shape{1, c} : Shape{c});
    std::move(kept.begin(), kept.end(), out->data<std::string>());
    return Status::Ok();
  }

 private:
  enum class Action { kNone, kLower, kUpper };
  Action action_ = Action::kNone;
  bool case_sensitive_ = false;
  std::unordered_set<std::string> stopwords_;
};

}  // namespace

void RegisterStringNormalizerKernels(KernelRegistry& r) {
  r.Add("StringNormalizer", 10, kOpsetMax, {DataType::kString},
        MakeKernel<StringNormalizerKernel>());
}

}  // namespace inferd::cpu
