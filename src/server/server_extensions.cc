#include "server/server_extensions.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <charconv>
#include <fstream>
#include <set>

namespace inferd::server {
namespace {

bool ParseInt(const std::string& s, int64_t* out) {
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

// One trace setting's values, checked.
Status CheckTraceValue(const std::string& name, const std::vector<std::string>& v) {
  auto one = [&]() -> Status {
    if (v.size() != 1) return InvalidArgument("trace setting '{}' takes one value", name);
    return Status::Ok();
  };
  int64_t n = 0;
  if (name == "trace_level") {
    for (const auto& level : v) {
      if (level != "OFF" && level != "TIMESTAMPS") {
        return InvalidArgument("trace setting 'trace_level': '{}' is not supported (OFF or "
                               "TIMESTAMPS)",
                               level);
      }
    }
    return v.empty() ? InvalidArgument("trace setting 'trace_level' needs a value")
                     : Status::Ok();
  }
  if (name == "trace_rate" || name == "trace_count" || name == "log_frequency") {
    RETURN_IF_ERROR(one());
    const int64_t min = name == "trace_rate" ? 1 : name == "trace_count" ? -1 : 0;
    if (!ParseInt(v[0], &n) || n < min) {
      return InvalidArgument("trace setting '{}': '{}' must be an integer >= {}", name, v[0], min);
    }
    return Status::Ok();
  }
  if (name == "trace_file") return one();
  if (name == "trace_mode") {
    RETURN_IF_ERROR(one());
    if (v[0] != "triton") {
      return InvalidArgument("trace setting 'trace_mode': '{}' is not supported (triton)", v[0]);
    }
    return Status::Ok();
  }
  return InvalidArgument("unknown trace setting '{}'", name);
}

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string JsonEscaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", c);
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

ServerExtensions::ServerExtensions(std::string id) : id_(std::move(id)) {
  MutexLock l(&mu_);
  log_ = {{"log_file", std::string()},        {"log_info", true},
          {"log_warning", true},              {"log_error", true},
          {"log_verbose_level", uint32_t{0}}, {"log_format", std::string("default")}};
  trace_ = {{"trace_level", {"OFF"}}, {"trace_rate", {"1000"}}, {"trace_count", {"-1"}},
            {"log_frequency", {"0"}}, {"trace_file", {""}},     {"trace_mode", {"triton"}}};
}

const std::vector<const char*>& ServerExtensions::Names() {
  static const std::vector<const char*> names = {"classification", "binary_tensor_data",
                                                 "statistics", "model_configuration",
                                                 "model_repository", "schedule_policy",
                                                 "sequence", "system_shared_memory",
                                                 "trace", "logging"};
  return names;
}

LogSettings ServerExtensions::GetLog() const {
  MutexLock l(&mu_);
  return log_;
}

Status ServerExtensions::UpdateLog(const LogSettings& update) {
  MutexLock l(&mu_);
  LogSettings next = log_;
  for (const auto& [name, value] : update) {
    auto it = next.find(name);
    if (it == next.end()) return InvalidArgument("unknown log setting '{}'", name);
    if (value.index() != it->second.index()) {
      return InvalidArgument("log setting '{}' has the wrong type (expected {})", name,
                             it->second.index() == 0 ? "a bool"
                             : it->second.index() == 1 ? "an unsigned integer" : "a string");
    }
    if (name == "log_file" && std::get<std::string>(value) != std::get<std::string>(it->second)) {
      return InvalidArgument("log setting 'log_file' cannot be changed (inferd logs to stderr)");
    }
    if (name == "log_format") {
      const std::string& f = std::get<std::string>(value);
      if (f != "default" && f != "ISO8601") {
        return InvalidArgument("log setting 'log_format': '{}' is not one of default, ISO8601", f);
      }
    }
    it->second = value;
  }
  log_ = std::move(next);
  ApplyLogLevelLocked();
  return Status::Ok();
}

void ServerExtensions::ApplyLogLevelLocked() const {
  const uint32_t verbose = std::get<uint32_t>(log_.at("log_verbose_level"));
  spdlog::level::level_enum level = spdlog::level::off;
  if (verbose > 1) level = spdlog::level::trace;
  else if (verbose == 1) level = spdlog::level::debug;
  else if (std::get<bool>(log_.at("log_info"))) level = spdlog::level::info;
  else if (std::get<bool>(log_.at("log_warning"))) level = spdlog::level::warn;
  else if (std::get<bool>(log_.at("log_error"))) level = spdlog::level::err;
  spdlog::set_level(level);
  if (std::get<std::string>(log_.at("log_format")) == "ISO8601") {
    spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%fZ %l %v", spdlog::pattern_time_type::utc);
  } else {
    spdlog::set_pattern("%+");
  }
}

TraceSettings ServerExtensions::EffectiveLocked(const std::string& model) const {
  TraceSettings s = trace_;
  auto it = model_trace_.find(model);
  if (!model.empty() && it != model_trace_.end()) {
    for (const auto& [k, v] : it->second) s[k] = v;
  }
  return s;
}

TraceSettings ServerExtensions::GetTrace(const std::string& model) const {
  MutexLock l(&mu_);
  return EffectiveLocked(model);
}

Status ServerExtensions::UpdateTrace(const std::string& model, const TraceSettings& update) {
  for (const auto& [name, values] : update) {
    static const std::set<std::string> kNames = {"trace_level",   "trace_rate", "trace_count",
                                                 "log_frequency", "trace_file", "trace_mode"};
    if (values.empty() && !model.empty()) {  // clears the model's override
      if (!kNames.count(name)) return InvalidArgument("unknown trace setting '{}'", name);
      continue;
    }
    RETURN_IF_ERROR(CheckTraceValue(name, values));
  }
  MutexLock l(&mu_);
  TraceSettings& target = model.empty() ? trace_ : model_trace_[model];
  for (const auto& [name, values] : update) {
    if (values.empty()) {
      target.erase(name);
    } else {
      target[name] = values;
    }
  }
  return Status::Ok();
}

std::optional<TraceHandle> ServerExtensions::StartTrace(const std::string& model) {
  MutexLock l(&mu_);
  TraceSettings s = EffectiveLocked(model);
  const auto& level = s["trace_level"];
  if (std::find(level.begin(), level.end(), "TIMESTAMPS") == level.end()) return std::nullopt;
  if (s["trace_file"].empty() || s["trace_file"][0].empty()) return std::nullopt;
  int64_t rate = 1, count = -1;
  ParseInt(s["trace_rate"][0], &rate);
  ParseInt(s["trace_count"][0], &count);
  if (count == 0 || (requests_seen_++ % static_cast<uint64_t>(std::max<int64_t>(rate, 1))) != 0) {
    return std::nullopt;
  }
  if (count > 0) {
    TraceSettings& target = model_trace_.count(model) && model_trace_[model].count("trace_count")
                                ? model_trace_[model]
                                : trace_;
    target["trace_count"] = {std::to_string(count - 1)};
  }
  return TraceHandle{next_trace_id_++, model, SteadyNs(), s["trace_file"][0]};
}

void ServerExtensions::FinishTrace(const TraceHandle& t, int64_t model_version) {
  const std::string line = fmt::format(
      "{{\"id\":{},\"model_name\":\"{}\",\"model_version\":{},\"timestamps\":[{{\"name\":"
      "\"REQUEST_START\",\"ns\":{}}},{{\"name\":\"REQUEST_END\",\"ns\":{}}}]}}\n",
      t.id, JsonEscaped(t.model), model_version, t.start_ns, SteadyNs());
  MutexLock l(&file_mu_);
  std::ofstream out(t.file, std::ios::app);
  out << line;
  if (!out) spdlog::warn("trace: cannot write to '{}'", t.file);
}

}  // namespace inferd::server
