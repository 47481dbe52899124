#include "tools/log_level.h"

#include <spdlog/spdlog.h>

namespace inferd::tools {

void AddLogLevelOption(CLI::App* cmd, std::string* level) {
  cmd->add_option("--log-level", *level, "trace, debug, info, warn or error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
      ->capture_default_str();
}

void ApplyLogLevel(const std::string& level) {
  spdlog::set_level(spdlog::level::from_str(level));
}

}  // namespace inferd::tools
