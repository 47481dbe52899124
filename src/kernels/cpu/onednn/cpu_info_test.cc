// cpu_info.h's pure parts against hand-written inputs, and machine_peak.h's argument checks.
#include "kernels/cpu/onednn/cpu_info.h"

#include <gtest/gtest.h>

#include "kernels/cpu/onednn/machine_peak.h"

namespace inferd::cpu {
namespace {

TEST(CpuInfoTest, ParsesTheFirstModelName) {
  const char* text =
      "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel\t\t: 1\n"
      "model name\t: AMD EPYC 7B13 64-Core Processor  \nflags\t\t: fpu avx2\n\n"
      "processor\t: 1\nmodel name\t: other\n";
  EXPECT_EQ(ParseCpuModelName(text), "AMD EPYC 7B13 64-Core Processor");
  EXPECT_EQ(ParseCpuModelName("processor : 0\nmodel : 207\n"), "");
  EXPECT_EQ(ParseCpuModelName(""), "");
  EXPECT_EQ(ParseCpuModelName("model name"), "");  // no colon
}

TEST(CpuInfoTest, DecodesCpuidBits) {
  // Zen 3: FMA (1:ECX 12), AVX2 (7:EBX 5), nothing AVX-512.
  CpuFeatures zen3 = FeaturesFromCpuid(1u << 12, 1u << 5, 0, 0, 0);
  EXPECT_TRUE(zen3.fma);
  EXPECT_TRUE(zen3.avx2);
  EXPECT_FALSE(zen3.avx512f);
  EXPECT_FALSE(zen3.avx512_bf16);
  // Sapphire Rapids-like: AVX512F (EBX 16), VNNI (ECX 11), AMX (EDX 22/24/25), AVX-VNNI and
  // AVX512_BF16 (7.1:EAX 4/5).
  CpuFeatures spr = FeaturesFromCpuid(1u << 12, (1u << 5) | (1u << 16), 1u << 11,
                                      (1u << 22) | (1u << 24) | (1u << 25), (1u << 4) | (1u << 5));
  EXPECT_TRUE(spr.avx512f && spr.avx512_vnni && spr.amx_tile && spr.amx_int8 && spr.amx_bf16);
  EXPECT_TRUE(spr.avx_vnni && spr.avx512_bf16);
}

TEST(CpuInfoTest, NamesIsasAndDescribes) {
  EXPECT_EQ(DnnlIsaName(0x7), "avx2");
  EXPECT_EQ(DnnlIsaName(0xe7), "avx512_core_bf16");
  EXPECT_EQ(DnnlIsaName(0x12345), "isa 0x12345");
  CpuInfo cpu;
  cpu.model_name = "Test CPU";
  cpu.dnnl_isa = "avx2";
  cpu.features.fma = cpu.features.avx2 = true;
  EXPECT_EQ(DescribeCpu(cpu),
            "Test CPU (oneDNN ISA avx2; cpuid: fma avx2, no avx512f avx512_vnni avx_vnni "
            "avx512_bf16 amx; bf16 layers compute in FP32, int8 without VNNI (7-bit weights for "
            "exactness))");
  EXPECT_FALSE(DetectCpu().dnnl_isa.empty());
}

TEST(MachinePeakTest, RejectsBadSizesAndMeasuresSmallOnes) {
  PeakOptions bad;
  bad.gemm_size = 4;
  EXPECT_EQ(MeasureMachinePeaks(bad).status().code(), StatusCode::kInvalidArgument);
  bad = {};
  bad.tries = 0;
  EXPECT_EQ(MeasureMachinePeaks(bad).status().code(), StatusCode::kInvalidArgument);
  PeakOptions small;
  small.threads = 1;
  small.gemm_size = 32;
  small.mem_bytes = 1 << 16;
  small.tries = 1;
  StatusOr<MachinePeaks> p = MeasureMachinePeaks(small);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_GT(p->fp32_gflops, 0);
  EXPECT_GT(p->int8_gops, 0);
  EXPECT_GT(p->mem_read_gbps, 0);
  EXPECT_EQ(p->threads, 1);
  EXPECT_DOUBLE_EQ(PercentOfPeak(25, 100), 25);
  EXPECT_DOUBLE_EQ(PercentOfPeak(25, 0), 0);
}

}  // namespace
}  // namespace inferd::cpu
