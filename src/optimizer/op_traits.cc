#include "optimizer/op_traits.h"

namespace inferd {

bool IsNondeterministicOp(const std::string& op_type) {
  return op_type == "RandomNormal" || op_type == "RandomUniform" || op_type == "RandomNormalLike" ||
         op_type == "RandomUniformLike" || op_type == "Multinomial" || op_type == "Bernoulli";
}

}  // namespace inferd
