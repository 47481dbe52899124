// What CPU the kernels run on, for the one line `serve`, `bench` and `inspect` log at start: the
// model name (/proc/cpuinfo), oneDNN's effective ISA (the one its kernels are chosen for;
// ONEDNN_MAX_CPU_ISA applies) and the cpuid feature bits that decide inferd's own paths (int8
// exactness with VNNI, native BF16, AMX). The choices themselves ask dnnl_util.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace inferd::cpu {

// cpuid feature bits (what the processor reports; the OS may still disable AVX-512/AMX state,
// which oneDNN's ISA accounts for).
struct CpuFeatures {
  bool fma = false;
  bool avx2 = false;
  bool avx512f = false;
  bool avx512_vnni = false;
  bool avx_vnni = false;
  bool avx512_bf16 = false;
  bool amx_tile = false;
  bool amx_int8 = false;
  bool amx_bf16 = false;
};

struct CpuInfo {
  std::string model_name;  // "" when /proc/cpuinfo has none
  std::string dnnl_isa;    // "avx2", "avx512_core_vnni", ...
  CpuFeatures features;
  bool native_bf16 = false;  // DnnlHasNativeBf16()
  bool int8_vnni = false;    // oneDNN's int8 kernels accumulate exactly in int32 (VNNI)
};

// The first "model name" value of /proc/cpuinfo's text; "" when absent.
std::string ParseCpuModelName(std::string_view proc_cpuinfo);
// Decodes CPUID.1:ECX, CPUID.(7,0):EBX/ECX/EDX and CPUID.(7,1):EAX.
CpuFeatures FeaturesFromCpuid(uint32_t leaf1_ecx, uint32_t leaf7_ebx, uint32_t leaf7_ecx,
                              uint32_t leaf7_edx, uint32_t leaf7_1_eax);
// oneDNN's name for a dnnl_cpu_isa_t value ("isa 0x..." for an unknown one).
std::string DnnlIsaName(uint32_t isa);

// This machine (computed once; thread-safe).
const CpuInfo& DetectCpu();

// One line: "AMD EPYC 7B13 (oneDNN ISA avx2; cpuid: fma avx2, no avx512f avx512_vnni avx_vnni
// avx512_bf16 amx; bf16 layers compute in FP32, int8 without VNNI)".
std::string DescribeCpu(const CpuInfo& cpu);

}  // namespace inferd::cpu
