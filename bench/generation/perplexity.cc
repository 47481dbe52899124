// Perplexity of a decoder model folder on a text file, through the paged model runner (the
// engine's own model path, FP32 or weight-only INT8/INT4 folders from `inferd quantize`):
//   build/inferd_perplexity --model DIR --text FILE [--window 256] [--max-tokens 16384]
//       [--streams 8] [--threads 2] [--kv-cache-dtype float32|int8]
// Each line of FILE is a paragraph; the tokens of [BOS] + paragraph, paragraphs one after the
// other, are cut into windows of `window` tokens, and every window predicts its tokens 1..W-1
// from the tokens before them. The windows run `streams` at a time, one token per window per
// step (the decode path, as generation runs it). Prints one JSON line: tokens scored, mean
// negative log-likelihood (nats), perplexity = exp(mean NLL). bench/generation/perplexity.py runs
// it for FP32/INT8/INT4 weights and FP32 weights with an INT8 KV cache (--kv-cache-dtype, the
// runner's RunnerOptions::kv_cache_dtype). Not a test: run by hand.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "generation/model_runner.h"
#include "generation/tokenizer.h"

namespace {

struct Args {
  std::string model, text, kv_cache_dtype = "float32";
  int window = 256, streams = 8, threads = 2;
  long max_tokens = 16384;
};

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--model") {
      a->model = v;
    } else if (k == "--text") {
      a->text = v;
    } else if (k == "--window") {
      a->window = std::atoi(v.c_str());
    } else if (k == "--streams") {
      a->streams = std::atoi(v.c_str());
    } else if (k == "--threads") {
      a->threads = std::atoi(v.c_str());
    } else if (k == "--kv-cache-dtype") {
      a->kv_cache_dtype = v;
    } else if (k == "--max-tokens") {
      a->max_tokens = std::atol(v.c_str());
    } else {
      return false;
    }
  }
  return argc % 2 == 1 && !a->model.empty() && !a->text.empty() && a->window >= 2 &&
         a->streams >= 1 && a->max_tokens >= a->window;
}

int Fail(const inferd::Status& st) {
  std::fprintf(stderr, "inferd_perplexity: %s\n", st.ToString().c_str());
  return 1;
}

// -log softmax(row)[target].
double Nll(const float* row, int vocab, int target) {
  const float mx = *std::max_element(row, row + vocab);
  double sum = 0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(double(row[i]) - mx);
  return std::log(sum) + mx - row[target];
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, &a)) {
    std::fprintf(stderr,
                 "usage: %s --model DIR --text FILE [--window N] [--max-tokens N] [--streams N] "
                 "[--threads N] [--kv-cache-dtype float32|int8]\n",
                 argv[0]);
    return 2;
  }
  auto tok = inferd::gen::Tokenizer::Load(a.model + "/tokenizer.model");
  if (!tok.ok()) return Fail(tok.status());
  std::ifstream f(a.text);
  if (!f) return Fail(inferd::InvalidArgument("cannot read {}", a.text));
  std::vector<int32_t> all;
  for (std::string line; std::getline(f, line) && static_cast<long>(all.size()) < a.max_tokens;) {
    if (line.empty()) continue;
    all.push_back((*tok)->bos_id());
    for (int32_t t : (*tok)->Encode(line)) all.push_back(t);
  }
  const size_t windows = std::min<size_t>(all.size(), a.max_tokens) / a.window;
  if (windows == 0) return Fail(inferd::InvalidArgument("{}: fewer than one window", a.text));

  auto cfg = inferd::gen::LoadDecoderConfig(a.model + "/config.json");
  if (!cfg.ok()) return Fail(cfg.status());
  inferd::gen::RunnerOptions ro;
  ro.num_threads = a.threads;
  auto kv_dtype = inferd::gen::ParseKvCacheDtype(a.kv_cache_dtype);
  if (!kv_dtype.ok()) return Fail(kv_dtype.status());
  ro.kv_cache_dtype = *kv_dtype;
  const int per_seq = (a.window + ro.block_size - 1) / ro.block_size;
  ro.kv_cache_bytes =
      inferd::gen::KvBlockBytes(*cfg, ro.block_size, ro.kv_cache_dtype) * per_seq * a.streams;
  auto runner_or = inferd::gen::CreateDecoderRunner(a.model, ro);
  if (!runner_or.ok()) return Fail(runner_or.status());
  inferd::gen::ModelRunner& runner = **runner_or;
  const int vocab = cfg->vocab_size;
  std::vector<std::vector<int32_t>> tables(a.streams);
  for (int s = 0; s < a.streams; ++s) {
    for (int b = 0; b < per_seq; ++b) tables[s].push_back(s * per_seq + b);
  }
  double nll = 0;
  long scored = 0;
  for (size_t w0 = 0; w0 < windows; w0 += a.streams) {
    const int n = static_cast<int>(std::min<size_t>(a.streams, windows - w0));
    for (int t = 0; t + 1 < a.window; ++t) {
      std::vector<inferd::gen::SequenceChunk> chunks;
      for (int s = 0; s < n; ++s) {
        const int32_t* w = all.data() + (w0 + s) * a.window;
        chunks.push_back({s, std::span<const int32_t>(w + t, 1), t, tables[s], true});
      }
      inferd::Tensor logits;
      inferd::Status st = runner.Step(chunks, &logits);
      if (!st.ok()) return Fail(st);
      for (int s = 0; s < n; ++s) {
        const int32_t target = all[(w0 + s) * a.window + t + 1];
        nll += Nll(logits.data<float>() + int64_t{s} * vocab, vocab, target);
        ++scored;
      }
    }
  }
  std::printf("{\"model\": \"%s\", \"kv_cache_dtype\": \"%s\", \"tokens\": %ld, "
              "\"windows\": %zu, \"window\": %d, \"nll\": %.6f, \"perplexity\": %.4f}\n",
              a.model.c_str(), a.kv_cache_dtype.c_str(), scored, windows, a.window, nll / scored,
              std::exp(nll / scored));
  return 0;
}
