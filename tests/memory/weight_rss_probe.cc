// Weight-memory probe: resident memory of a loaded model against its initializer bytes, after
// runs at batch 1, batch 16 and batch 1 again (each new shape may build new kernel plans).
//
// Not part of the CMake build (a measurement tool); build it against a build dir's libraries:
//   B=build-mem; g++ -std=c++20 -O2 -Isrc -I$B tests/memory/weight_rss_probe.cc -o $B/weight_rss_probe \
//     $B/libinferd_session.a $B/libinferd_optimizer.a $B/libinferd_kernels_cpu.a \
//     $B/libinferd_runtime.a $B/libinferd_graph.a $B/libinferd_common.a -ldnnl -lonnx -lonnx_proto \
//     -lprotobuf -lfmt -lspdlog -fopenmp
//   $B/weight_rss_probe build/models/resnet50/model.onnx [seq_len]
#include <malloc.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "kernels/cpu/onednn/packed_weights.h"
#include "session/session.h"

namespace {

double RssMiB() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1;
}

inferd::StatusOr<std::vector<inferd::Tensor>> Inputs(const inferd::Session& s, int64_t batch,
                                                    int64_t seq) {
  std::vector<inferd::Tensor> in;
  for (const inferd::ValueInfo& vi : s.inputs()) {
    if (!vi.shape) return inferd::InvalidArgument("input {} has no shape", vi.name);
    inferd::Shape shape;
    for (size_t d = 0; d < vi.shape->size(); ++d) {
      const inferd::Dim& dim = (*vi.shape)[d];
      shape.push_back(dim.known() ? dim.value : d == 0 ? batch : seq);
    }
    in.push_back(inferd::Tensor::Allocate(vi.dtype, shape));  // zeros: valid ids and features
  }
  return in;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.onnx [seq_len]\n", argv[0]);
    return 1;
  }
  const int64_t seq = argc > 2 ? std::stoll(argv[2]) : 128;
  const double base = RssMiB();
  auto s = inferd::Session::Create(argv[1]);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
    return 1;
  }
  double init_bytes = 0;
  for (const auto& [name, t] : (*s)->model().graph.initializers) init_bytes += t.ByteSize();
  malloc_trim(0);
  std::printf("initializers %.1f MiB; RSS before load %.1f, after load %.1f MiB\n",
              init_bytes / 1048576.0, base, RssMiB());
  for (int64_t batch : {1, 16, 1}) {
    auto in = Inputs(**s, batch, seq);
    if (!in.ok()) {
      std::fprintf(stderr, "%s\n", in.status().ToString().c_str());
      return 1;
    }
    std::vector<inferd::Tensor> out;
    auto st = (*s)->Run(std::span<const inferd::Tensor>(*in), &out);
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      return 1;
    }
    out.clear();
    in->clear();
    malloc_trim(0);
    const auto packed = inferd::cpu::PackedWeights::LiveTotals();
    std::printf("after batch %ld: RSS %.1f MiB (arena of this shape %.1f MiB; packed weights %ld "
                "layouts, %.1f MiB)\n",
                static_cast<long>(batch), RssMiB(),
                (*s)->executor().memory_stats().arena_bytes / 1048576.0,
                static_cast<long>(packed.layouts), packed.bytes / 1048576.0);
  }
  return 0;
}
