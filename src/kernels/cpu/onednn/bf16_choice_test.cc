// The bf16-compute decision (onednn/bf16_choice.h) from its inputs, and the process's own choice
// being consistent with this CPU.
#include "kernels/cpu/onednn/bf16_choice.h"

#include <gtest/gtest.h>

#include "kernels/cpu/onednn/dnnl_util.h"

namespace inferd::cpu {
namespace {

TEST(Bf16ChoiceTest, NoNativeBf16IsFp32WhateverTheEnvironmentSays) {
  for (const char* env : {"", "auto", "on", "off"}) {
    const Bf16Choice c = DecideBf16(false, env, 3.0, 3.0);
    EXPECT_FALSE(c.conv) << env;
    EXPECT_FALSE(c.matmul) << env;
    EXPECT_NE(c.reason.find("no native bf16"), std::string::npos) << c.reason;
  }
}

TEST(Bf16ChoiceTest, MeasuredSpeedupDecidesEachLayerKind) {
  const Bf16Choice slow = DecideBf16(true, "", 0.62, 0.75);  // the Intel Xeon of model 207
  EXPECT_FALSE(slow.conv);
  EXPECT_FALSE(slow.matmul);
  EXPECT_NE(slow.reason.find("convolutions in FP32 (bf16 measured 0.62x FP32)"), std::string::npos)
      << slow.reason;
  const Bf16Choice mixed = DecideBf16(true, "auto", 1.9, 1.05);
  EXPECT_TRUE(mixed.conv);
  EXPECT_FALSE(mixed.matmul);  // below kBf16MinSpeedup
  EXPECT_DOUBLE_EQ(mixed.conv_speedup, 1.9);
  EXPECT_TRUE(DecideBf16(true, "", kBf16MinSpeedup, kBf16MinSpeedup).matmul);
}

TEST(Bf16ChoiceTest, EnvironmentForcesOnlyWithNativeBf16) {
  const Bf16Choice on = DecideBf16(true, "on", 0.5, 0.5);
  EXPECT_TRUE(on.conv && on.matmul);
  EXPECT_NE(on.reason.find("INFERD_BF16_COMPUTE=on"), std::string::npos);
  const Bf16Choice off = DecideBf16(true, "off", 3.0, 3.0);
  EXPECT_FALSE(off.conv || off.matmul);
  const Bf16Choice odd = DecideBf16(true, "yes", 2.0, 0.5);  // unknown: auto, and said
  EXPECT_TRUE(odd.conv);
  EXPECT_FALSE(odd.matmul);
  EXPECT_NE(odd.reason.find("INFERD_BF16_COMPUTE=yes unknown"), std::string::npos) << odd.reason;
}

TEST(Bf16ChoiceTest, ProcessChoiceFollowsThisCpu) {
  const Bf16Choice& c = Bf16ComputeChoice();
  if (!DnnlHasNativeBf16()) {
    EXPECT_FALSE(c.conv || c.matmul);
    EXPECT_EQ(c.conv_speedup, 0);
  } else {
    // Measured (unless the environment forces): the probes ran and their ratios decide.
    EXPECT_GT(c.conv_speedup, 0);
    EXPECT_GT(c.matmul_speedup, 0);
    EXPECT_EQ(c.conv, c.conv_speedup >= kBf16MinSpeedup);
  }
  EXPECT_EQ(&c, &Bf16ComputeChoice());  // decided once
}

}  // namespace
}  // namespace inferd::cpu
