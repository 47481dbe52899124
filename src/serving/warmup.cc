#include "serving/warmup.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <tuple>
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

// The shape of one model_warmup input: its dims, behind the batch size when the model batches.
StatusOr<Shape> WarmupShape(const inference::ModelWarmup& w, const std::string& name,
                            const inference::ModelWarmup::Input& in, int max_batch_size) {
  Shape shape(in.dims().begin(), in.dims().end());
  if (max_batch_size > 0) shape.insert(shape.begin(), w.batch_size());
  for (int64_t d : shape) {
    if (d < 0) {
      return InvalidArgument("model_warmup '{}': input '{}' needs fixed dims", w.name(), name);
    }
  }
  return shape;
}

// The tensor of one model_warmup input (its shape already checked and within the byte bound).
StatusOr<Tensor> WarmupInput(const inference::ModelWarmup& w, const inference::ModelWarmup::Input& in,
                             DataType dtype, const Shape& shape, const fs::path& model_dir,
                             const std::string& model_name, std::mt19937& rng) {
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
    ASSIGN_OR_RETURN(const fs::path path,
                     ResolveModelFile(model_dir, model_name, "warmup",
                                      fs::path("warmup") / in.input_data_file(),
                                      fmt::format("model_warmup '{}' input_data_file", w.name())));
    std::error_code ec;
    const uintmax_t size = fs::file_size(path, ec);
    std::string bytes;
    // The size is checked before reading, so a huge file is never read into memory.
    if (ec || size != t.ByteSize() || !ReadRepositoryFile(path, &bytes) ||
        bytes.size() != t.ByteSize()) {
      return InvalidArgument("model_warmup '{}': file '{}' must hold {} bytes", w.name(),
                             in.input_data_file(), t.ByteSize());
    }
    std::memcpy(t.raw_data(), bytes.data(), bytes.size());
  }
  return t;
}

StatusOr<std::vector<WarmupPlan>> ConfigPlans(const inference::ModelConfig& config,
                                              const fs::path& model_dir, uint64_t max_bytes) {
  std::vector<WarmupPlan> plans;
  for (const auto& w : config.model_warmup()) {
    WarmupPlan plan{w.name(), {}, std::max<uint32_t>(1, w.count())};
    // Every input's size first: nothing is allocated for a sample over the bound.
    std::vector<std::tuple<std::string, DataType, Shape>> shapes;
    uint64_t total = 0;
    for (const auto& [name, in] : w.inputs()) {
      ASSIGN_OR_RETURN(DataType dtype, FromConfigDataType(in.data_type()));
      ASSIGN_OR_RETURN(Shape shape, WarmupShape(w, name, in, config.max_batch_size()));
      const uint64_t bytes = TensorBytes(dtype, shape);
      total = bytes > UINT64_MAX - total ? UINT64_MAX : total + bytes;
      shapes.emplace_back(name, dtype, std::move(shape));
    }
    if (total > max_bytes) {
      return InvalidArgument("model_warmup '{}': its inputs need {} bytes, over the limit of {} "
                             "bytes per warmup sample (--max-warmup-bytes)",
                             w.name(), total == UINT64_MAX ? std::string("more than 2^64")
                                                           : std::to_string(total),
                             max_bytes);
    }
    std::mt19937 rng(0);
    for (const auto& [name, dtype, shape] : shapes) {
      ASSIGN_OR_RETURN(Tensor t, WarmupInput(w, w.inputs().at(name), dtype, shape, model_dir,
                                             config.name(), rng));
      plan.feeds.emplace_back(name, std::move(t));
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

// Zeros at batch 1 and at max_batch_size, reshaped as the config asks.
std::vector<WarmupPlan> DefaultPlans(const ModelSignature& sig, uint64_t max_bytes) {
  std::vector<WarmupPlan> plans;
  std::vector<int64_t> batches{1};
  if (sig.max_batch_size > 1) batches.push_back(sig.max_batch_size);
  for (int64_t b : batches) {
    if (const uint64_t bytes = ZeroRequestBytes(sig, b); bytes > max_bytes) {
      spdlog::warn("model '{}' version {}: default warmup at batch {} skipped: it needs {} bytes, "
                   "over the limit of {} (--max-warmup-bytes)",
                   sig.name, sig.version, b, bytes, max_bytes);
      continue;
    }
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

Status RunPlansOnce(const Session& session, const std::vector<WarmupPlan>& plans,
                    const std::atomic<bool>* abandoned) {
  for (const WarmupPlan& plan : plans) {
    for (uint32_t i = 0; i < plan.count; ++i) {
      if (abandoned != nullptr && abandoned->load()) {
        return DeadlineExceeded("model_warmup '{}': the load was abandoned after {} of {} runs",
                                plan.name, i, plan.count);
      }
      std::vector<Tensor> outs;
      Status s = session.Run(plan.feeds, &outs);
      if (!s.ok()) return s.WithContext(fmt::format("model_warmup '{}'", plan.name));
    }
  }
  return Status::Ok();
}

// Runs on warmup threads of its own: an exception (bad_alloc) must become a Status here, or it
// would terminate the process.
Status RunPlans(const Session& session, const std::vector<WarmupPlan>& plans,
                const std::atomic<bool>* abandoned) {
  try {
    return RunPlansOnce(session, plans, abandoned);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("warmup ran out of memory (std::bad_alloc)");
  } catch (const std::exception& e) {
    return Internal("warmup threw: {}", e.what());
  }
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

std::unique_ptr<InferenceRequest> ZeroRequest(const ModelSignature& sig, int64_t batch) {
  auto request = std::make_unique<InferenceRequest>();
  request->model_name = sig.name;
  for (const auto& in : sig.inputs) {
    request->inputs.push_back({in.name, ZeroInput(sig, in, batch)});
  }
  return request;
}

uint64_t TensorBytes(DataType dtype, const Shape& shape) {
  const uint64_t element = dtype == DataType::kString ? 32 : SizeOf(dtype);
  uint64_t bytes = std::max<uint64_t>(1, element);
  for (int64_t d : shape) {
    const uint64_t n = d < 0 ? 1 : static_cast<uint64_t>(d);
    if (n != 0 && bytes > UINT64_MAX / n) return UINT64_MAX;
    bytes *= n;
  }
  return bytes;
}

uint64_t ZeroRequestBytes(const ModelSignature& sig, int64_t batch) {
  uint64_t total = 0;
  for (const auto& in : sig.inputs) {
    Shape shape = in.dims;
    if (sig.batching()) shape.insert(shape.begin(), batch);
    const uint64_t bytes = TensorBytes(in.dtype, shape);
    total = bytes > UINT64_MAX - total ? UINT64_MAX : total + bytes;
  }
  return total;
}

Status WarmupSession(const Session& session, const inference::ModelConfig& config,
                     const ModelSignature& sig, const fs::path& model_dir, int instances,
                     const WarmupLimits& limits) {
  ASSIGN_OR_RETURN(std::vector<WarmupPlan> plans,
                   ConfigPlans(config, model_dir, limits.max_bytes));
  const bool default_warmup = plans.empty();
  if (default_warmup) plans = DefaultPlans(sig, limits.max_bytes);
  std::vector<Status> results(std::max(1, instances));
  std::vector<std::thread> threads;
  for (size_t i = 1; i < results.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = RunPlans(session, plans, limits.abandoned); });
  }
  results[0] = RunPlans(session, plans, limits.abandoned);
  for (auto& t : threads) t.join();
  for (const Status& s : results) {
    if (s.ok()) continue;
    if (!default_warmup || s.code() == StatusCode::kDeadlineExceeded) return s;
    spdlog::warn("model '{}' version {}: {} failed: {}", sig.name, sig.version, "default warmup",
                 s.message());
    break;
  }
  return Status::Ok();
}

}  // namespace inferd::serving
