// The sequence batcher through ModelManager, on an accumulator model built here:
//   OUTPUT = INPUT * READY + (START ? 0 : STATE_IN),  STATE_OUT = OUTPUT,
//   CORR = float(CORRID),  ENDED = float(END).
#include "serving/sequence_batcher.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "graph/onnx_io.h"
#include "serving/model_manager.h"
#include "serving/test_models.h"
#include "testing/fake_clock.h"

namespace inferd::serving {
namespace {

namespace fs = std::filesystem;
using testing::Result;

ValueInfo Typed(const std::string& name, DataType dtype) {
  ValueInfo v;
  v.name = name;
  v.dtype = dtype;
  v.shape = std::vector<Dim>{Dim{-1, "batch"}, Dim{1, ""}};
  return v;
}

void AddCast(Graph& g, const std::string& in, const std::string& out, DataType to) {
  Node* n = g.AddNode("Cast", {in}, {out}, "cast_" + out);
  Attribute a;
  a.type = Attribute::Type::kInt;
  a.i = static_cast<int64_t>(to);
  n->attributes["to"] = a;
}

// Without `corrid` the model has no CORRID input and CORR is float(START).
void WriteAccumulator(const fs::path& path, bool corrid = true) {
  Model m;
  m.opsets[""] = 13;
  Graph& g = m.graph;
  g.name = "accumulate";
  g.inputs = {Typed("INPUT", DataType::kFloat32), Typed("START", DataType::kInt32),
              Typed("READY", DataType::kFloat32), Typed("END", DataType::kBool),
              Typed("STATE_IN", DataType::kFloat32)};
  if (corrid) g.inputs.push_back(Typed("CORRID", DataType::kUInt64));
  g.outputs = {Typed("OUTPUT", DataType::kFloat32), Typed("STATE_OUT", DataType::kFloat32),
               Typed("CORR", DataType::kFloat32), Typed("ENDED", DataType::kFloat32)};
  g.initializers["one"] = Tensor::FromVector<float>({1.0f}, Shape{1});
  AddCast(g, "START", "start_f", DataType::kFloat32);
  g.AddNode("Sub", {"one", "start_f"}, {"keep"}, "keep");
  g.AddNode("Mul", {"STATE_IN", "keep"}, {"prev"}, "prev");
  g.AddNode("Mul", {"INPUT", "READY"}, {"in_ready"}, "in_ready");
  g.AddNode("Add", {"in_ready", "prev"}, {"OUTPUT"}, "sum");
  g.AddNode("Identity", {"OUTPUT"}, {"STATE_OUT"}, "state");
  if (corrid) {
    AddCast(g, "CORRID", "CORR", DataType::kFloat32);
  } else {
    g.AddNode("Identity", {"start_f"}, {"CORR"}, "corr");
  }
  AddCast(g, "END", "ENDED", DataType::kFloat32);
  fs::create_directories(path.parent_path());
  ASSERT_TRUE(SaveOnnxModel(m, path).ok());
}

std::string Config(const std::string& strategy, int max_batch, int idle_us) {
  return R"(name: "acc"
max_batch_size: )" + std::to_string(max_batch) + R"(
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1 ] },
         { name: "CORR" data_type: TYPE_FP32 dims: [ 1 ] },
         { name: "ENDED" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
sequence_batching {
  )" + strategy + R"(
  max_sequence_idle_microseconds: )" + std::to_string(idle_us) + R"(
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY fp32_false_true: [ 0, 1 ] } ] },
    { name: "END" control [ { kind: CONTROL_SEQUENCE_END bool_false_true: [ false, true ] } ] },
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] }
  ]
  state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 dims: [ 1 ]
            initial_state: { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true name: "zero" } } ]
}
)";
}

class SequenceBatcherTest : public ::testing::Test {
 protected:
  void SetUp() override { repo_ = testing::FreshRepository("sequence_repo_"); }
  void TearDown() override {
    manager_.reset();
    fs::remove_all(repo_);
  }
  void Load(const std::string& config, Clock* clock = nullptr) {
    WriteAccumulator(repo_ / "acc" / "1" / "model.onnx");
    testing::WriteFile(repo_ / "acc" / "config.pbtxt", config);
    ModelManagerOptions o;
    o.repository = repo_;
    o.total_threads = 2;
    o.clock = clock;
    auto m = ModelManager::Create(o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    manager_ = std::move(m).value();
    ASSERT_TRUE(manager_->LoadRepository().ok());
    ASSERT_TRUE(manager_->IsModelReady("acc"));
  }
  static std::unique_ptr<InferenceRequest> Step(uint64_t id, float x, bool start = false,
                                                bool end = false) {
    auto r = testing::Request("acc", Tensor::FromVector<float>({x}, {1, 1}), "INPUT");
    r->sequence_id = id;
    r->sequence_start = start;
    r->sequence_end = end;
    return r;
  }
  static float Out(const Result& r, const std::string& name = "OUTPUT") {
    for (const auto& [n, t] : r.response.outputs) {
      if (n == name) return t.data<float>()[0];
    }
    ADD_FAILURE() << "no output " << name;
    return -1;
  }
  Result Infer(std::unique_ptr<InferenceRequest> r) {
    return testing::InferSync(*manager_, std::move(r));
  }

  fs::path repo_;
  FakeClock clock_;  // outlives the manager
  std::unique_ptr<ModelManager> manager_;
};

TEST_F(SequenceBatcherTest, InterleavedSequencesKeepTheirOwnState) {
  Load(Config("direct {}", 4, 10'000'000));
  auto a = Infer(Step(7, 1, /*start=*/true));
  ASSERT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_EQ(Out(a), 1);
  EXPECT_EQ(Out(a, "CORR"), 7);
  EXPECT_EQ(Out(a, "ENDED"), 0);
  // The state output is never returned, and metadata shows only the client's tensors.
  EXPECT_EQ(a.response.outputs.size(), 3u);
  auto md = manager_->GetMetadata("acc");
  ASSERT_TRUE(md.ok());
  ASSERT_EQ(md->inputs.size(), 1u);
  EXPECT_EQ(md->inputs[0].name, "INPUT");
  EXPECT_EQ(md->outputs.size(), 3u);
  auto b = Infer(Step(9, 100, true));
  EXPECT_EQ(Out(b), 100);
  EXPECT_EQ(Out(b, "CORR"), 9);
  EXPECT_EQ(Out(Infer(Step(7, 2))), 3);
  EXPECT_EQ(Out(Infer(Step(9, 200))), 300);
  auto a_end = Infer(Step(7, 3, false, true));
  EXPECT_EQ(Out(a_end), 6);
  EXPECT_EQ(Out(a_end, "ENDED"), 1);
  // END released sequence 7: without START it is unknown again.
  auto after = Infer(Step(7, 1));
  EXPECT_EQ(after.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(after.status.message().find("inference request for sequence 7 to model 'acc' must "
                                        "specify the START flag on the first request of the "
                                        "sequence"),
            std::string::npos)
      << after.status.message();
  // A new START restarts from the initial state.
  EXPECT_EQ(Out(Infer(Step(7, 5, true))), 5);
  EXPECT_EQ(Out(Infer(Step(9, 1, false, true))), 301);
}

TEST_F(SequenceBatcherTest, StringCorrelationIds) {
  // A uint64 CORRID control cannot carry a string ID; without CORRID strings work.
  std::string config = Config("oldest { max_candidate_sequences: 4 }", 4, 10'000'000);
  Load(config);
  auto r = Step(0, 1, true);
  r->sequence_id_string = "alpha";
  auto bad = Infer(std::move(r));
  EXPECT_EQ(bad.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status.message().find("correlation ID is a string"), std::string::npos);
  manager_.reset();

  const std::string corrid =
      R"(,
    { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } ] })";
  config.replace(config.find(corrid), corrid.size(), "");
  WriteAccumulator(repo_ / "acc" / "1" / "model.onnx", /*corrid=*/false);
  testing::WriteFile(repo_ / "acc" / "config.pbtxt", config);
  ModelManagerOptions o;
  o.repository = repo_;
  o.total_threads = 2;
  manager_ = std::move(ModelManager::Create(o)).value();
  ASSERT_TRUE(manager_->LoadRepository().ok());
  auto s = [](const std::string& id, float x, bool start, bool end) {
    auto r = Step(0, x, start, end);
    r->sequence_id_string = id;
    return r;
  };
  EXPECT_EQ(Out(Infer(s("alpha", 1, true, false))), 1);
  EXPECT_EQ(Out(Infer(s("beta", 10, true, false))), 10);
  EXPECT_EQ(Out(Infer(s("alpha", 2, false, false))), 3);
  EXPECT_EQ(Out(Infer(s("beta", 20, false, true))), 30);
  auto gone = Infer(s("beta", 1, false, false));
  EXPECT_NE(gone.status.message().find("sequence beta to model 'acc' must specify the START"),
            std::string::npos)
      << gone.status.message();
}

TEST_F(SequenceBatcherTest, BadSequenceRequests) {
  Load(Config("direct {}", 4, 10'000'000));
  auto none = Infer(Step(0, 1, true));
  EXPECT_EQ(none.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status.message().find("must specify a non-zero or non-empty correlation ID"),
            std::string::npos);
  auto unknown = Infer(Step(42, 1));
  EXPECT_EQ(unknown.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status.message().find("sequence 42"), std::string::npos);
  auto two_rows = testing::Request("acc", Tensor::FromVector<float>({1, 2}, {2, 1}), "INPUT");
  two_rows->sequence_id = 5;
  two_rows->sequence_start = true;
  EXPECT_NE(Infer(std::move(two_rows)).status.message().find("batch-size 1"), std::string::npos);
  // Control and state inputs are the batcher's, not the client's.
  auto r = Step(5, 1, true);
  r->inputs.push_back({"START", Tensor::FromVector<int32_t>({1}, {1, 1})});
  EXPECT_NE(Infer(std::move(r)).status.message().find("unexpected input 'START'"),
            std::string::npos);
}

TEST_F(SequenceBatcherTest, IdleSequenceIsReleased) {
  FakeClock& clock = clock_;
  Load(Config("direct {}", 4, 1000), &clock);
  EXPECT_EQ(Out(Infer(Step(3, 1, true))), 1);
  clock.Advance(std::chrono::microseconds(500));
  EXPECT_EQ(Out(Infer(Step(3, 1))), 2);  // within the idle limit
  clock.Advance(std::chrono::microseconds(1001));
  auto late = Infer(Step(3, 1));
  EXPECT_EQ(late.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(late.status.message().find("must specify the START flag"), std::string::npos);
  EXPECT_EQ(Out(Infer(Step(3, 4, true))), 4);
}

TEST_F(SequenceBatcherTest, IdleReleaseGivesTheSlotToTheBacklog) {
  // One slot (max_batch_size 1, one instance): sequence 2 waits until sequence 1 is released.
  Load(Config("direct {}", 1, 1000), &clock_);
  EXPECT_EQ(Out(Infer(Step(1, 1, true))), 1);
  auto waiting = testing::InferAsync(*manager_, Step(2, 5, true));
  auto next = testing::InferAsync(*manager_, Step(2, 6));
  EXPECT_EQ(waiting.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  clock_.Advance(std::chrono::microseconds(1001));  // the reaper releases sequence 1
  EXPECT_EQ(Out(waiting.get()), 5);
  EXPECT_EQ(Out(next.get()), 11);
  // Sequence 1 lost its slot and its state.
  auto late = Infer(Step(1, 1));
  EXPECT_NE(late.status.message().find("sequence 1 to model 'acc' must specify the START"),
            std::string::npos)
      << late.status.message();
}

TEST_F(SequenceBatcherTest, ConcurrentSequencesMatchSerialResults) {
  // Three slots for six sequences: the later ones wait in the backlog until earlier ones end.
  for (const std::string strategy : {"direct { max_queue_delay_microseconds: 1000 }",
                                     "oldest { max_candidate_sequences: 3 }"}) {
    SCOPED_TRACE(strategy);
    Load(Config(strategy, 3, 10'000'000));
    constexpr int kSequences = 6, kSteps = 5;
    std::vector<std::vector<std::future<Result>>> results(kSequences);
    for (int step = 0; step < kSteps; ++step) {
      for (int s = 0; s < kSequences; ++s) {
        results[s].push_back(testing::InferAsync(
            *manager_, Step(s + 1, static_cast<float>((s + 1) * (step + 1)), step == 0,
                            step == kSteps - 1)));
      }
    }
    for (int s = 0; s < kSequences; ++s) {
      float sum = 0;
      for (int step = 0; step < kSteps; ++step) {
        sum += static_cast<float>((s + 1) * (step + 1));
        Result r = results[s][step].get();
        ASSERT_TRUE(r.status.ok()) << r.status.ToString();
        EXPECT_EQ(Out(r), sum) << "sequence " << s + 1 << " step " << step;
        EXPECT_EQ(Out(r, "CORR"), s + 1);
        EXPECT_EQ(Out(r, "ENDED"), step == kSteps - 1 ? 1 : 0);
      }
    }
    manager_.reset();
  }
}

TEST_F(SequenceBatcherTest, ConfigErrorsNameTheField) {
  WriteAccumulator(repo_ / "acc" / "1" / "model.onnx");
  std::string config = Config("direct {}", 4, 1000);
  config.replace(config.find("TYPE_UINT64 } ] }"), 11, "TYPE_STRING");
  testing::WriteFile(repo_ / "acc" / "config.pbtxt", config);
  ModelManagerOptions o;
  o.repository = repo_;
  o.total_threads = 2;
  manager_ = std::move(ModelManager::Create(o)).value();
  (void)manager_->LoadRepository();
  EXPECT_FALSE(manager_->IsModelReady("acc"));
  auto s = manager_->LoadModel("acc");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("string CORRID"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace inferd::serving
