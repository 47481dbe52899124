#include "loadgen/gen_stats.h"

#include <fmt/format.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <numeric>

#include "common/stats.h"
#include "loadgen/report.h"

namespace inferd::loadgen {

namespace {

constexpr int kMaxLength = 1'000'000;

StatusOr<int> ParseInt(std::string_view s, std::string_view flag) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
    return InvalidArgument("{}: '{}' is not an integer", flag, s);
  }
  return v;
}

int Draw(std::mt19937_64& rng, LengthRange r) {
  return std::uniform_int_distribution<int>(r.lo, r.hi)(rng);
}

}  // namespace

StatusOr<LengthRange> ParseLengthRange(std::string_view text, std::string_view flag) {
  const size_t colon = text.find(':');
  LengthRange r;
  ASSIGN_OR_RETURN(r.lo, ParseInt(text.substr(0, colon), flag));
  r.hi = r.lo;
  if (colon != std::string_view::npos) {
    ASSIGN_OR_RETURN(r.hi, ParseInt(text.substr(colon + 1), flag));
  }
  if (r.lo < 1 || r.hi < r.lo || r.hi > kMaxLength) {
    return InvalidArgument("{}: need 1 <= MIN <= MAX <= {} in '{}' (MIN:MAX or N)", flag,
                           kMaxLength, text);
  }
  return r;
}

std::vector<GenPrompt> RandomPrompts(int n, LengthRange input, LengthRange output, int vocab_size,
                                     uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> token(3, std::max(3, vocab_size - 1));
  std::vector<GenPrompt> prompts(static_cast<size_t>(std::max(n, 0)));
  for (GenPrompt& p : prompts) {
    p.ids.resize(static_cast<size_t>(Draw(rng, input)));
    for (int32_t& id : p.ids) id = token(rng);
    p.prompt_tokens = static_cast<int>(p.ids.size());
    p.max_tokens = Draw(rng, output);
  }
  return prompts;
}

StatusOr<std::vector<GenPrompt>> ParseJsonlPrompts(std::string_view jsonl, int n,
                                                   LengthRange output, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<GenPrompt> all;
  size_t pos = 0;
  for (int line_no = 1; pos < jsonl.size(); ++line_no) {
    size_t end = std::min(jsonl.find('\n', pos), jsonl.size());
    std::string line(jsonl.substr(pos, end - pos));
    pos = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    rapidjson::Document d;
    d.Parse(line.c_str());
    auto bad = [&](std::string_view why) {
      return InvalidArgument("dataset line {}: {}", line_no, why);
    };
    if (d.HasParseError() || !d.IsObject()) return bad("not a JSON object");
    if (!d.HasMember("prompt")) return bad("no \"prompt\"");
    GenPrompt p;
    const auto& pr = d["prompt"];
    if (pr.IsString()) {
      p.text = pr.GetString();
    } else if (pr.IsArray() && !pr.Empty()) {
      for (const auto& v : pr.GetArray()) {
        if (!v.IsInt() || v.GetInt() < 0) return bad("\"prompt\" array holds a non-token value");
        p.ids.push_back(v.GetInt());
      }
      p.prompt_tokens = static_cast<int>(p.ids.size());
    } else {
      return bad("\"prompt\" must be a string or a non-empty array of token ids");
    }
    p.max_tokens = Draw(rng, output);
    if (d.HasMember("max_tokens")) {
      if (!d["max_tokens"].IsInt() || d["max_tokens"].GetInt() < 1) {
        return bad("\"max_tokens\" must be a positive integer");
      }
      p.max_tokens = d["max_tokens"].GetInt();
    }
    if (d.HasMember("prompt_tokens") && d["prompt_tokens"].IsInt()) {
      p.prompt_tokens = d["prompt_tokens"].GetInt();
    }
    all.push_back(std::move(p));
  }
  if (all.empty()) return InvalidArgument("the dataset has no prompts");
  std::vector<GenPrompt> out;
  for (int i = 0; i < n; ++i) out.push_back(all[static_cast<size_t>(i) % all.size()]);
  return out;
}

std::string CompletionBody(const std::string& model, const GenPrompt& prompt, bool ignore_eos) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("model");
  w.String(model.c_str(), static_cast<rapidjson::SizeType>(model.size()));
  w.Key("prompt");
  if (prompt.ids.empty()) {
    w.String(prompt.text.c_str(), static_cast<rapidjson::SizeType>(prompt.text.size()));
  } else {
    w.StartArray();
    for (int32_t id : prompt.ids) w.Int(id);
    w.EndArray();
  }
  w.Key("max_tokens");
  w.Int(prompt.max_tokens);
  w.Key("temperature");
  w.Int(0);
  w.Key("stream");
  w.Bool(true);
  w.Key("stream_options");
  w.StartObject();
  w.Key("include_usage");
  w.Bool(true);
  w.EndObject();
  w.Key("ignore_eos");
  w.Bool(ignore_eos);
  w.EndObject();
  return sb.GetString();
}

// ---- SSE ----

std::vector<std::string> SseParser::Feed(std::string_view bytes) {
  std::vector<std::string> events;
  for (char c : bytes) {
    if (c == '\n' && last_cr_) {  // the LF of a CRLF whose CR ended the line already
      last_cr_ = false;
      continue;
    }
    last_cr_ = c == '\r';
    if (c == '\n' || c == '\r') {
      Line(pending_, &events);
      pending_.clear();
    } else {
      pending_ += c;
    }
  }
  return events;
}

void SseParser::Line(std::string_view line, std::vector<std::string>* events) {
  if (line.empty()) {  // a blank line dispatches the event
    if (has_data_) events->push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;  // comment (keep-alive)
  const size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field != "data") return;
  if (has_data_) data_ += '\n';
  data_.append(value);
  has_data_ = true;
}

StatusOr<CompletionChunk> ParseCompletionChunk(std::string_view data) {
  CompletionChunk c;
  if (data == "[DONE]") {
    c.done = true;
    return c;
  }
  rapidjson::Document d;
  d.Parse(data.data(), data.size());
  if (d.HasParseError() || !d.IsObject()) {
    return InvalidArgument("stream chunk is not a JSON object: '{}'", data.substr(0, 120));
  }
  if (d.HasMember("error")) {
    const auto& e = d["error"];
    c.error = e.IsObject() && e.HasMember("message") && e["message"].IsString()
                  ? e["message"].GetString()
                  : "error";
    return c;
  }
  if (d.HasMember("choices") && d["choices"].IsArray() && !d["choices"].Empty()) {
    const auto& ch = d["choices"][0];
    c.has_choice = true;
    if (ch.HasMember("text") && ch["text"].IsString()) c.text = ch["text"].GetString();
    if (ch.HasMember("delta") && ch["delta"].IsObject() && ch["delta"].HasMember("content") &&
        ch["delta"]["content"].IsString()) {
      c.text = ch["delta"]["content"].GetString();
    }
    if (ch.HasMember("finish_reason") && ch["finish_reason"].IsString()) {
      c.finish_reason = ch["finish_reason"].GetString();
    }
  }
  if (d.HasMember("usage") && d["usage"].IsObject()) {
    const auto& u = d["usage"];
    if (u.HasMember("completion_tokens") && u["completion_tokens"].IsInt()) {
      c.completion_tokens = u["completion_tokens"].GetInt();
    }
    if (u.HasMember("prompt_tokens") && u["prompt_tokens"].IsInt()) {
      c.prompt_tokens = u["prompt_tokens"].GetInt();
    }
  }
  return c;
}

// ---- Statistics ----

double GenRequestRecord::Tpot() const {
  return output_tokens > 1 ? (e2e - ttft) / (output_tokens - 1) : 0.0;
}

MsSummary SummarizeSeconds(std::vector<double> seconds) {
  MsSummary s;
  if (seconds.empty()) return s;
  for (double& v : seconds) v *= 1000.0;
  std::sort(seconds.begin(), seconds.end());
  s.count = static_cast<int64_t>(seconds.size());
  s.mean = std::accumulate(seconds.begin(), seconds.end(), 0.0) / static_cast<double>(s.count);
  s.median = Percentile(seconds, 50);
  s.p90 = Percentile(seconds, 90);
  s.p99 = Percentile(seconds, 99);
  return s;
}

GenRunResult SummarizeRun(const std::vector<GenRequestRecord>& records, double duration_s,
                          const GenSloOptions& slo) {
  GenRunResult r;
  r.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2e;
  std::map<std::string, int64_t> errors;
  int64_t good = 0;
  for (const GenRequestRecord& rec : records) {
    if (!rec.ok) {
      ++r.failed;
      ++errors[rec.error.empty() ? "error" : rec.error];
      continue;
    }
    ++r.completed;
    r.input_tokens += rec.prompt_tokens;
    r.output_tokens += rec.output_tokens;
    ttft.push_back(rec.ttft);
    e2e.push_back(rec.e2e);
    if (rec.output_tokens > 1) tpot.push_back(rec.Tpot());
    itl.insert(itl.end(), rec.itl.begin(), rec.itl.end());
    const bool ttft_ok = slo.ttft_ms <= 0 || rec.ttft * 1000.0 <= slo.ttft_ms;
    const bool tpot_ok = slo.tpot_ms <= 0 || rec.Tpot() * 1000.0 <= slo.tpot_ms;
    if (ttft_ok && tpot_ok) ++good;
  }
  const double d = std::max(duration_s, 1e-9);
  r.request_throughput = static_cast<double>(r.completed) / d;
  r.output_throughput = static_cast<double>(r.output_tokens) / d;
  r.total_token_throughput = static_cast<double>(r.input_tokens + r.output_tokens) / d;
  r.goodput = static_cast<double>(good) / d;
  r.ttft = SummarizeSeconds(std::move(ttft));
  r.tpot = SummarizeSeconds(std::move(tpot));
  r.itl = SummarizeSeconds(std::move(itl));
  r.e2e = SummarizeSeconds(std::move(e2e));
  r.errors.assign(errors.begin(), errors.end());
  return r;
}

std::string GenRunsToJson(const std::vector<GenRunResult>& runs, const GenSloOptions& slo) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartArray();
  for (const GenRunResult& r : runs) {
    w.StartObject();
    w.Key(r.concurrency_mode ? "max_concurrency" : "request_rate");
    w.Double(r.level);
    auto num = [&](const char* k, double v) {
      w.Key(k);
      w.Double(v);
    };
    auto count = [&](const char* k, int64_t v) {
      w.Key(k);
      w.Int64(v);
    };
    num("duration", r.duration_s);
    count("completed", r.completed);
    count("failed", r.failed);
    count("total_input_tokens", r.input_tokens);
    count("total_output_tokens", r.output_tokens);
    num("request_throughput", r.request_throughput);
    num("output_throughput", r.output_throughput);
    num("total_token_throughput", r.total_token_throughput);
    num("request_goodput", r.goodput);
    num("slo_ttft_ms", slo.ttft_ms);
    num("slo_tpot_ms", slo.tpot_ms);
    for (auto [name, s] :
         {std::pair{"ttft", &r.ttft}, {"tpot", &r.tpot}, {"itl", &r.itl}, {"e2el", &r.e2e}}) {
      num(fmt::format("mean_{}_ms", name).c_str(), s->mean);
      num(fmt::format("median_{}_ms", name).c_str(), s->median);
      num(fmt::format("p90_{}_ms", name).c_str(), s->p90);
      num(fmt::format("p99_{}_ms", name).c_str(), s->p99);
    }
    w.Key("errors");
    w.StartObject();
    for (const auto& [kind, n] : r.errors) {
      w.Key(kind.c_str());
      w.Int64(n);
    }
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  return std::string(sb.GetString()) + "\n";
}

std::string GenRunsSvg(const std::vector<GenRunResult>& runs, const std::string& title) {
  std::vector<PointResult> points;
  for (const GenRunResult& r : runs) {
    PointResult p;
    p.mode = r.concurrency_mode ? PointResult::Mode::kConcurrency : PointResult::Mode::kRequestRate;
    p.level = r.level;
    p.throughput = r.output_throughput;
    p.latency.count = r.ttft.count;
    p.latency.p50_us = static_cast<int64_t>(r.ttft.median * 1000.0);
    p.latency.p99_us = static_cast<int64_t>(r.ttft.p99 * 1000.0);
    points.push_back(p);
  }
  return LatencyThroughputSvg(points, title, "output throughput (tokens/s)", "TTFT (ms)");
}

}  // namespace inferd::loadgen
