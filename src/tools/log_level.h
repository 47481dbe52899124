// The --log-level flag the long-running subcommands share (serve, batch, worker): one definition
// of its values and of how it is applied, so the three cannot drift apart.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace inferd::tools {

// Adds `--log-level` (trace, debug, info, warn or error; the parse fails on anything else) bound
// to *level, whose current value is shown as the default.
void AddLogLevelOption(CLI::App* cmd, std::string* level);

// Sets spdlog's global level from a value AddLogLevelOption accepted.
void ApplyLogLevel(const std::string& level);

}  // namespace inferd::tools
