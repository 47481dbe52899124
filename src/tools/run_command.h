// `inferd run`: load a model, feed .npy files or random inputs, write the outputs as .npy.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "common/status.h"

namespace inferd::tools {

struct RunOptions {
  std::filesystem::path model;
  // "NAME=FILE.npy" arguments; inputs not named here get random data (see RandomInput).
  std::vector<std::string> inputs;
  // Where to write <output name>.npy; empty: write nothing.
  std::filesystem::path output_dir;
  // Intra-op threads; 0 = all cores.
  int threads = 0;
  // Seed for random inputs.
  uint64_t seed = 0;
  // Runs of the same inputs; from the second on the memory plan is used. Every run's outputs must
  // equal the first's, bit for bit (else an error): with poison_arena, a check that no kernel
  // reads activation memory it did not write.
  int runs = 1;
  bool poison_arena = false;
};

// Runs the model (once, or `runs` times). Prints one summary line per output and the timings to `out`, notes (e.g.
// which inputs were generated) to `log`. Errors name the input, file or node at fault.
Status RunModelCommand(const RunOptions& options, std::ostream& out, std::ostream& log);

// Prefixes the status message with the file name unless the message already names it.
Status WithPath(const Status& status, const std::filesystem::path& path);

}  // namespace inferd::tools
