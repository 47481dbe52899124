// A main() for a fuzz target built without libFuzzer (GCC builds; `ctest -R fuzz_corpus_replay`):
// runs LLVMFuzzerTestOneInput once on every file given, or on every file of every folder given,
// so the committed corpora (seeds and the inputs of past crashes) are regression tests in
// `make test` too. A broken contract aborts (FUZZ_CHECK), as it would under libFuzzer.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void RunFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path arg(argv[i]);
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec)) {
      std::vector<std::filesystem::path> files;
      for (const auto& e : std::filesystem::directory_iterator(arg)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
      std::sort(files.begin(), files.end());  // a stable order, so a failure names the same file
      for (const auto& f : files) RunFile(f), ++runs;
    } else if (std::filesystem::is_regular_file(arg, ec)) {
      RunFile(arg), ++runs;
    } else {
      std::fprintf(stderr, "replay: %s is neither a file nor a folder\n", argv[i]);
      return 2;
    }
  }
  std::printf("replay: %d inputs, no failure\n", runs);
  return runs > 0 ? 0 : 1;
}
