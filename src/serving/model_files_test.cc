// Attacks 5 and 6 of issue 15 at the serving layer: every file a load reads stays inside the
// model's folder (repository.h's ResolveModelFile), non-regular files never block a load, error
// texts never reveal the repository's absolute path, warmup is bounded in bytes before it
// allocates, and worker warmup does not wait out the queue delay.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <string>

#include "serving/model_manager.h"
#include "serving/repository.h"
#include "serving/test_models.h"
#include "testing/fake_clock.h"

namespace inferd::serving {
namespace {

namespace fs = std::filesystem;

class ModelFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = testing::FreshRepository("serving_files_");
    outside_ = repo_.parent_path() / (repo_.filename().string() + "_outside");
    fs::remove_all(outside_);
    fs::create_directories(outside_);
    testing::WriteFile(outside_ / "secret.txt", "root:x:0:0:secret\n");
  }
  void TearDown() override {
    manager_.reset();
    fs::remove_all(repo_);
    fs::remove_all(outside_);
  }
  void Start(ModelManagerOptions o = {}) {
    o.repository = repo_;
    o.total_threads = 1;
    auto m = ModelManager::Create(o);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    manager_ = std::move(m).value();
    ASSERT_TRUE(manager_->LoadRepository().ok());
  }
  // name → "STATE: reason" of the model's first index row.
  std::map<std::string, std::string> Rows() {
    std::map<std::string, std::string> out;
    for (const auto& e : manager_->Index()) {
      if (!out.count(e.name)) out[e.name] = e.state + ": " + e.reason;
    }
    return out;
  }
  void ExpectServes(const std::string& model) {
    testing::Result r = testing::InferSync(
        *manager_, testing::Request(model, Tensor::FromVector<float>({1.f, 2.f}, {1, 2})));
    EXPECT_TRUE(r.status.ok()) << model << ": " << r.status.ToString();
  }

  fs::path repo_, outside_;
  std::unique_ptr<ModelManager> manager_;
};

TEST_F(ModelFilesTest, ResolveModelFileConfinesToTheFolderAndWantsRegularFiles) {
  testing::WriteAddModel(repo_ / "m" / "1" / "model.onnx");
  testing::WriteFile(repo_ / "m" / "labels.txt", "a\n");
  testing::WriteAddModel(repo_ / "other" / "1" / "model.onnx");
  const fs::path dir = repo_ / "m";
  auto ok = ResolveModelFile(dir, "m", "1", "1/model.onnx", "model file");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, fs::canonical(dir / "1" / "model.onnx"));

  auto up = ResolveModelFile(dir, "m", "1", "1/../../other/1/model.onnx", "default_model_filename");
  ASSERT_FALSE(up.ok());
  EXPECT_EQ(up.status().message(),
            "default_model_filename 'm/1/../../other/1/model.onnx' is outside the folder 'm/1' "
            "(absolute paths, '..' and symlinks leading out are refused)");
  // The version folder, not the model folder, holds a version's model file.
  EXPECT_FALSE(ResolveModelFile(dir, "m", "1", "1/../labels.txt", "model file").ok());
  EXPECT_TRUE(ResolveModelFile(dir, "m", "", "labels.txt", "label_filename").ok());
  auto abs = ResolveModelFile(dir, "m", "1", (outside_ / "secret.txt").string(), "model file");
  ASSERT_FALSE(abs.ok());
  EXPECT_EQ(abs.status().code(), StatusCode::kInvalidArgument);

  fs::create_symlink(outside_ / "secret.txt", dir / "1" / "link.onnx");
  auto link = ResolveModelFile(dir, "m", "1", "1/link.onnx", "model file");
  ASSERT_FALSE(link.ok());
  EXPECT_NE(link.status().message().find("outside the folder 'm/1'"), std::string::npos);

  ASSERT_EQ(::mkfifo((dir / "1" / "fifo.onnx").c_str(), 0600), 0);
  auto fifo = ResolveModelFile(dir, "m", "1", "1/fifo.onnx", "model file");
  ASSERT_FALSE(fifo.ok());
  EXPECT_EQ(fifo.status().message(), "model file 'm/1/fifo.onnx' is a FIFO, not a regular file");
  fs::create_directories(dir / "1" / "sub.onnx");
  EXPECT_NE(ResolveModelFile(dir, "m", "1", "1/sub.onnx", "model file")
                .status().message().find("is a directory"),
            std::string::npos);
  auto missing = ResolveModelFile(dir, "m", "1", "1/none.onnx", "model file");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "model file 'm/1/none.onnx' does not exist");

  // A symlinked model folder is the operator's choice: files inside it still resolve.
  fs::create_directory_symlink(repo_ / "other", repo_ / "alias");
  EXPECT_TRUE(ResolveModelFile(repo_ / "alias", "alias", "1", "1/model.onnx", "model file").ok());
}

TEST_F(ModelFilesTest, HidePathReplacesOnlyWholePathStarts) {
  const fs::path dir = repo_ / "m";
  fs::create_directories(dir);
  EXPECT_EQ(HidePath("cannot open " + (dir / "1/model.onnx").string() + ": gone", dir, "m"),
            "cannot open m/1/model.onnx: gone");
  EXPECT_EQ(HidePath("x " + fs::canonical(dir).string() + "/1/a", dir, "m"), "x m/1/a");
  EXPECT_EQ(HidePath("/other" + dir.string() + "/a", dir, "m"), "/other" + dir.string() + "/a");
}

// A FIFO as model.onnx fails that model at once (nothing opens it); the model beside it serves.
TEST_F(ModelFilesTest, FifoModelFileFailsFastWhileOthersServe) {
  testing::WriteAddModel(repo_ / "good" / "1" / "model.onnx");
  fs::create_directories(repo_ / "fifo" / "1");
  ASSERT_EQ(::mkfifo((repo_ / "fifo" / "1" / "model.onnx").c_str(), 0600), 0);
  fs::create_directories(repo_ / "fifocfg" / "1");
  testing::WriteAddModel(repo_ / "fifocfg" / "1" / "model.onnx");
  ASSERT_EQ(::mkfifo((repo_ / "fifocfg" / "config.pbtxt").c_str(), 0600), 0);
  Start();
  auto rows = Rows();
  EXPECT_EQ(rows["good"], "READY: ");
  EXPECT_EQ(rows["fifo"], "UNAVAILABLE: model file 'fifo/1/model.onnx' is a FIFO, not a regular "
                          "file");
  EXPECT_NE(rows["fifocfg"].find("config.pbtxt 'fifocfg/config.pbtxt' is a FIFO"),
            std::string::npos) << rows["fifocfg"];
  ExpectServes("good");
}

// default_model_filename with '..', an absolute path or a symlink out; a label file and a warmup
// file outside: all refused, and no message names the repository's absolute path.
TEST_F(ModelFilesTest, FilesOutsideTheModelFolderAreNeverRead) {
  testing::WriteAddModel(repo_ / "other" / "1" / "model.onnx");
  const std::map<std::string, std::string> configs = {
      {"dotdot", "default_model_filename: \"../../other/1/model.onnx\""},
      {"absolute", "default_model_filename: \"" + (repo_ / "other/1/model.onnx").string() + "\""},
      {"labels", "max_batch_size: 4 output [{ name: \"y\" data_type: TYPE_FP32 dims: [ -1 ] "
                 "label_filename: \"../" + repo_.filename().string() + "_outside/secret.txt\" }]"},
      {"warmupfile", "max_batch_size: 4 input [{ name: \"x\" data_type: TYPE_FP32 dims: [ 2 ] }] "
                     "model_warmup [{ name: \"w\" batch_size: 1 inputs { key: \"x\" value: { "
                     "data_type: TYPE_FP32 dims: [ 2 ] input_data_file: \"../../" +
                         repo_.filename().string() + "_outside/secret.txt\" } } }]"},
  };
  for (const auto& [name, text] : configs) {
    testing::WriteAddModel(repo_ / name / "1" / "model.onnx");
    testing::WriteFile(repo_ / name / "config.pbtxt", text);
  }
  fs::create_directories(repo_ / "symlink" / "1");
  fs::create_symlink(repo_ / "other" / "1" / "model.onnx", repo_ / "symlink" / "1" / "model.onnx");
  Start();
  auto rows = Rows();
  EXPECT_EQ(rows["other"], "READY: ");
  for (const char* name : {"dotdot", "absolute", "labels", "warmupfile", "symlink"}) {
    EXPECT_EQ(rows[name].rfind("UNAVAILABLE: ", 0), 0u) << name << ": " << rows[name];
    EXPECT_NE(rows[name].find("is outside the folder"), std::string::npos)
        << name << ": " << rows[name];
    EXPECT_EQ(rows[name].find(repo_.string()), std::string::npos) << name << ": " << rows[name];
  }
  ExpectServes("other");
}

// Load errors name files relative to the repository (a corrupt model's parse error included).
TEST_F(ModelFilesTest, LoadErrorsDoNotRevealTheRepositoryPath) {
  testing::WriteFile(repo_ / "corrupt" / "1" / "model.onnx", "not a model");
  Start();
  const std::string row = Rows()["corrupt"];
  EXPECT_NE(row.find("corrupt/1/model.onnx"), std::string::npos) << row;
  EXPECT_EQ(row.find(repo_.string()), std::string::npos) << row;
  EXPECT_EQ(row.find(fs::canonical(repo_).string()), std::string::npos) << row;
}

// Warmup sizes are checked before allocating: a config warmup over max_warmup_bytes fails the
// load naming the bound; a default warmup step over it is skipped and the model serves.
TEST_F(ModelFilesTest, WarmupBytesAreBoundedBeforeAllocating) {
  testing::WriteAddModel(repo_ / "big" / "1" / "model.onnx");
  testing::WriteFile(repo_ / "big" / "config.pbtxt",
                     "max_batch_size: 4 input [{ name: \"x\" data_type: TYPE_FP32 dims: [ -1 ] }] "
                     "model_warmup [{ name: \"w\" batch_size: 4 inputs { key: \"x\" value: { "
                     "data_type: TYPE_FP32 dims: [ 1000000 ] zero_data: true } } }]");
  testing::WriteAddModel(repo_ / "wide" / "1" / "model.onnx");
  testing::WriteFile(repo_ / "wide" / "config.pbtxt",
                     "max_batch_size: 1024 input [{ name: \"x\" data_type: TYPE_FP32 dims: [ 512 ] "
                     "}] output [{ name: \"y\" data_type: TYPE_FP32 dims: [ 512 ] }]");
  ModelManagerOptions o;
  o.max_warmup_bytes = 1 << 20;  // 1 MiB: batch 1024 × 512 floats (2 MiB) is over it
  Start(o);
  auto rows = Rows();
  EXPECT_EQ(rows["big"], "UNAVAILABLE: model_warmup 'w': its inputs need 16000000 bytes, over the "
                         "limit of 1048576 bytes per warmup sample (--max-warmup-bytes)");
  EXPECT_EQ(rows["wide"], "READY: ");
}

// An allocation that fails during a load (here a 4 TiB warmup sample, with the byte bound lifted)
// is std::bad_alloc on the load's thread: caught at the load boundary, it fails that model only.
TEST_F(ModelFilesTest, BadAllocDuringALoadFailsOnlyThatModel) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer allocators abort on a 4 TiB request instead of failing it";
#endif
  testing::WriteAddModel(repo_ / "good" / "1" / "model.onnx");
  testing::WriteAddModel(repo_ / "huge" / "1" / "model.onnx");
  testing::WriteFile(repo_ / "huge" / "config.pbtxt",
                     "input [{ name: \"x\" data_type: TYPE_FP32 dims: [ -1, -1 ] }] "
                     "model_warmup [{ name: \"w\" batch_size: 1 inputs { key: \"x\" value: { "
                     "data_type: TYPE_FP32 dims: [ 1048576, 1048576 ] zero_data: true } } }]");
  ModelManagerOptions o;
  o.max_warmup_bytes = UINT64_MAX;
  Start(o);
  auto rows = Rows();
  EXPECT_EQ(rows["huge"], "UNAVAILABLE: out of memory while loading (std::bad_alloc)");
  EXPECT_EQ(rows["good"], "READY: ");
  ExpectServes("good");
}

// Worker warmup goes through the scheduler as whole batches, so a 5 s queue delay on a clock that
// never moves does not hold the load (it used to wait out the delay: every load took 5 s).
TEST_F(ModelFilesTest, WorkerWarmupDoesNotWaitOutTheQueueDelay) {
  testing::WriteAddModel(repo_ / "delayed" / "1" / "model.onnx");
  testing::WriteFile(repo_ / "delayed" / "config.pbtxt",
                     "max_batch_size: 8 input [{ name: \"x\" data_type: TYPE_FP32 dims: [ 2 ] }] "
                     "output [{ name: \"y\" data_type: TYPE_FP32 dims: [ 2 ] }] "
                     "dynamic_batching { max_queue_delay_microseconds: 5000000 } "
                     "instance_group [{ count: 2 }]");
  FakeClock clock;
  ModelManagerOptions o;
  o.repository = repo_;
  o.total_threads = 2;
  o.clock = &clock;
  auto m = ModelManager::Create(o);
  ASSERT_TRUE(m.ok());
  manager_ = std::move(m).value();
  auto loaded = std::async(std::launch::async, [&] { return manager_->LoadModel("delayed"); });
  // A guard against a hang, not a timing check: the fake clock never moves, so the load finishes
  // only if nothing in it waits for the delay.
  if (loaded.wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
    ADD_FAILURE() << "the load waits for the queue delay";
    clock.Advance(std::chrono::seconds(10));
  }
  Status s = loaded.get();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Rows()["delayed"], "READY: ");
  manager_.reset();  // before the clock it uses
}

}  // namespace
}  // namespace inferd::serving
