#include "kernels/cpu/onednn/cpu_info.h"

#include <cpuid.h>
#include <fmt/format.h>

#include <oneapi/dnnl/dnnl.h>
#include <fstream>
#include <sstream>
#include <vector>

#include "kernels/cpu/onednn/dnnl_util.h"

namespace inferd::cpu {

std::string ParseCpuModelName(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.starts_with("model name")) continue;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\r')) value.remove_suffix(1);
    return std::string(value);
  }
  return "";
}

CpuFeatures FeaturesFromCpuid(uint32_t leaf1_ecx, uint32_t leaf7_ebx, uint32_t leaf7_ecx,
                              uint32_t leaf7_edx, uint32_t leaf7_1_eax) {
  auto bit = [](uint32_t reg, int b) { return ((reg >> b) & 1u) != 0; };
  CpuFeatures f;
  f.fma = bit(leaf1_ecx, 12);
  f.avx2 = bit(leaf7_ebx, 5);
  f.avx512f = bit(leaf7_ebx, 16);
  f.avx512_vnni = bit(leaf7_ecx, 11);
  f.amx_bf16 = bit(leaf7_edx, 22);
  f.amx_tile = bit(leaf7_edx, 24);
  f.amx_int8 = bit(leaf7_edx, 25);
  f.avx_vnni = bit(leaf7_1_eax, 4);
  f.avx512_bf16 = bit(leaf7_1_eax, 5);
  return f;
}

std::string DnnlIsaName(uint32_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_all: return "all";
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: break;
  }
  return fmt::format("isa {:#x}", isa);
}

namespace {

CpuFeatures ReadCpuid() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  uint32_t l1c = 0, l7b = 0, l7c = 0, l7d = 0, l71a = 0;
  if (__get_cpuid(1, &a, &b, &c, &d)) l1c = c;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    l7b = b;
    l7c = c;
    l7d = d;
    const unsigned max_sub = a;
    if (max_sub >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) l71a = a;
  }
  return FeaturesFromCpuid(l1c, l7b, l7c, l7d, l71a);
}

CpuInfo Detect() {
  CpuInfo info;
  std::ifstream f("/proc/cpuinfo");
  std::stringstream text;
  text << f.rdbuf();
  info.model_name = ParseCpuModelName(text.str());
  const auto isa = static_cast<uint32_t>(dnnl_get_effective_cpu_isa());
  info.dnnl_isa = DnnlIsaName(isa);
  info.features = ReadCpuid();
  info.native_bf16 = DnnlHasNativeBf16();
  const auto vnni = static_cast<uint32_t>(dnnl_cpu_isa_avx512_core_vnni);
  info.int8_vnni = (isa & vnni) == vnni;
  return info;
}

}  // namespace

const CpuInfo& DetectCpu() {
  static const CpuInfo info = Detect();
  return info;
}

std::string DescribeCpu(const CpuInfo& cpu) {
  const CpuFeatures& f = cpu.features;
  const std::pair<const char*, bool> bits[] = {
      {"fma", f.fma},           {"avx2", f.avx2},         {"avx512f", f.avx512f},
      {"avx512_vnni", f.avx512_vnni}, {"avx_vnni", f.avx_vnni}, {"avx512_bf16", f.avx512_bf16},
      {"amx", f.amx_tile && f.amx_int8 && f.amx_bf16}};
  std::string have, missing;
  for (const auto& [name, on] : bits) {
    std::string& list = on ? have : missing;
    list += (list.empty() ? "" : " ") + std::string(name);
  }
  std::string cpuid = have.empty() ? "none" : have;
  if (!missing.empty()) cpuid += ", no " + missing;
  return fmt::format("{} (oneDNN ISA {}; cpuid: {}; bf16 layers {}, int8 {})",
                     cpu.model_name.empty() ? "unknown CPU" : cpu.model_name, cpu.dnnl_isa, cpuid,
                     cpu.native_bf16 ? "native" : "compute in FP32",
                     cpu.int8_vnni ? "with VNNI" : "without VNNI (7-bit weights for exactness)");
}

}  // namespace inferd::cpu
