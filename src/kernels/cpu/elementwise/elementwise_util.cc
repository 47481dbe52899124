#include "kernels/cpu/elementwise/elementwise_util.h"

namespace inferd::cpu {

std::vector<DataType> TypesOf(TypeClass c) {
  switch (c) {
    case TypeClass::kFloat:
      return FloatTypes();
    case TypeClass::kSignedNumeric: {
      std::vector<DataType> t = FloatTypes();
      for (DataType d : {DataType::kInt8, DataType::kInt16, DataType::kInt32, DataType::kInt64}) {
        t.push_back(d);
      }
      return t;
    }
    case TypeClass::kNumeric:
      return NumericTypes();
    case TypeClass::kInteger:
      return IntegerTypes();
    case TypeClass::kUnsigned:
      return {DataType::kUInt8, DataType::kUInt16, DataType::kUInt32, DataType::kUInt64};
    case TypeClass::kBool:
      return {DataType::kBool};
    case TypeClass::kAll:
      return AllTypes();
  }
  return {};
}

}  // namespace inferd::cpu
