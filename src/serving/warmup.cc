#include "serving/warmup.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "serving/model_config.h"
#include "serving/repository.h"

namespace inferd::serving {
namespace {

namespace fs = std::filesystem;

// One warmup step: the feeds of one model_warmup entry and how often to run them.
struct WarmupPlan {
  std::string name;
  std::vector<std::pair<std::string, Tensor>> feeds;
  uint32_t count = 1;
};

// The tensor of one model_warmup input.
StatusOr<Tensor> WarmupInput(const inference::ModelWarmup& w, const std::string& name,
                             const inference::ModelWarmup::Input& in, int max_batch_size,
                             const fs::path& model_dir, std::mt19937& rng) {
  ASSIGN_OR_RETURN(DataType dtype, FromConfigDataType(in.data_type()));
  Shape shape(in.dims().begin(), in.dims().end());
  if (max_batch_size > 0) shape.insert(shape.begin(), w.batch_size());
  for (int64_t d : shape) {
    if (d < 0) {
      return InvalidArgument("model_warmup '{}': input '{}' needs fixed dims", w.name(), name);
    }
  }
  Tensor t = Tensor::Allocate(dtype, shape);
  if (in.has_random_data()) {
    DispatchNumeric(
        dtype,
        [&](auto tag) {
          using T = decltype(tag);
          for (int64_t i = 0; i < t.NumElements(); ++i) t.data<T>()[i] = static_cast<T>(rng() % 4);
        },
        [] {});
  } else if (in.has_input_data_file()) {
    std::string bytes;
    const bool ok = ReadRepositoryFile(model_dir / "warmup" / in.input_data_file(), &bytes);
    if (!ok || bytes.size() != t.ByteSize()) {
      return InvalidArgument("model_warmup '{}': file '{}' must hold {} bytes", w.name(),
                             in.input_data_file(), t.ByteSize());
    }
    std::memcpy(t.raw_data(), bytes.data(), bytes.size());
  }
  return t;
}

StatusOr<std::vector<WarmupPlan>> ConfigPlans(const inference::ModelConfig& config,
                                              const fs::path& model_dir) {
  std::vector<WarmupPlan> plans;
  for (const auto& w : config.model_warmup()) {
    WarmupPlan plan{w.name(), {}, std::max<uint32_t>(1, w.count())};
    std::mt19937 rng(0);
    for (const auto& [name, in] : w.inputs()) {
      ASSIGN_OR_RETURN(Tensor t,
                       WarmupInput(w, name, in, config.max_batch_size(), model_dir, rng));
      plan.feeds.emplace_back(name, std::move(t));
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

// Zeros at batch 1 and at max_batch_size, reshaped as the config asks.
std::vector<WarmupPlan> DefaultPlans(const ModelSignature& sig) {
  std::vector<WarmupPlan> plans;
  std::vector<int64_t> batches{1};
  if (sig.max_batch_size > 1) batches.push_back(sig.max_batch_size);
  for (int64_t b : batches) {
    WarmupPlan plan{fmt::format("default warmup at batch {}", b), {}, 1};
    for (const auto& in : sig.inputs) {
      Tensor t = ZeroInput(sig, in, b);
      if (in.reshape) {
        Shape r = *in.reshape;
        if (sig.batching()) r.insert(r.begin(), b);
        auto reshaped = t.Reshaped(r);
        if (!reshaped.ok()) break;
        t = std::move(reshaped).value();
      }
      plan.feeds.emplace_back(in.name, std::move(t));
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

Status RunPlans(const Session& session, const std::vector<WarmupPlan>& plans) {
  for (const WarmupPlan& plan : plans) {
    for (uint32_t i = 0; i < plan.count; ++i) {
      std::vector<Tensor> outs;
      Status s = session.Run(plan.feeds, &outs);
      if (!s.ok()) return s.WithContext(fmt::format("model_warmup '{}'", plan.name));
    }
  }
  return Status::Ok();
}

}  // namespace

Tensor ZeroInput(const ModelSignature& sig, const InputSpec& spec, int64_t batch) {
  Shape shape = spec.dims;
  for (int64_t& d : shape) d = d < 0 ? 1 : d;
  if (sig.batching()) shape.insert(shape.begin(), batch);
  Tensor t = Tensor::Allocate(spec.dtype, shape);
  if (t.is_string()) {  // "0": text that is also a number, so Cast-from-string models warm up too
    std::fill_n(t.data<std::string>(), t.NumElements(), std::string("0"));
    return t;
  }
  std::memset(t.raw_data(), 0, t.ByteSize());
  return t;
}

std::unique_ptr<InferenceRequest> ZeroRequest(const ModelSignature& sig) {
  auto request = std::make_unique<InferenceRequest>();
  request->model_name = sig.name;
  for (const auto& in : sig.inputs) request->inputs.push_back({in.name, ZeroInput(sig, in, 1)});
  return request;
}

Status WarmupSession(const Session& session, const inference::ModelConfig& config,
                     const ModelSignature& sig, const fs::path& model_dir, int instances) {
  ASSIGN_OR_RETURN(std::vector<WarmupPlan> plans, ConfigPlans(config, model_dir));
  const bool default_warmup = plans.empty();
  if (default_warmup) plans = DefaultPlans(sig);
  std::vector<Status> results(std::max(1, instances));
  std::vector<std::thread> threads;
  for (size_t i = 1; i < results.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = RunPlans(session, plans); });
  }
  results[0] = RunPlans(session, plans);
  for (auto& t : threads) t.join();
  for (const Status& s : results) {
    if (s.ok()) continue;
    if (!default_warmup) return s;
    spdlog::warn("model '{}' version {}: {} failed: {}", sig.name, sig.version, "default warmup",
                 s.message());
    break;
  }
  return Status::Ok();
}

}  // namespace inferd::serving
