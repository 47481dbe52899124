#include "server/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <gtest/gtest.h>

namespace inferd::server {
namespace {

// A POSIX shared-memory object holding int32 0..n-1, unlinked at the end of the test.
class ShmObject {
 public:
  ShmObject(const std::string& key, size_t n, mode_t mode = 0600) : key_(key) {
    shm_unlink(key_.c_str());
    int fd = shm_open(key_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(n * 4)), 0);
    for (int32_t i = 0; i < static_cast<int32_t>(n); ++i) {
      EXPECT_EQ(pwrite(fd, &i, 4, i * 4), 4);
    }
    fchmod(fd, mode);
    close(fd);
  }
  ~ShmObject() { shm_unlink(key_.c_str()); }
  int32_t Read(size_t i) const {
    int fd = shm_open(key_.c_str(), O_RDONLY, 0);
    int32_t v = -1;
    EXPECT_EQ(pread(fd, &v, 4, static_cast<off_t>(i * 4)), 4);
    close(fd);
    return v;
  }

 private:
  std::string key_;
};

std::string Key(const char* what) { return "/inferd_shm_test_" + std::to_string(getpid()) + what; }

TEST(SharedMemoryRegistry, RegisterStatusUnregister) {
  ShmObject obj(Key("a"), 64);
  SharedMemoryRegistry reg;
  ASSERT_TRUE(reg.Register("in", Key("a"), 16, 128).ok());
  auto again = reg.Register("in", Key("a"), 0, 4);
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(reg.Register("out", Key("a"), 0, 256).ok());
  auto all = reg.GetStatus("");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "in");
  EXPECT_EQ((*all)[0].key, Key("a"));
  EXPECT_EQ((*all)[0].offset, 16u);
  EXPECT_EQ((*all)[0].byte_size, 128u);
  auto one = reg.GetStatus("out");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->size(), 1u);
  auto missing = reg.GetStatus("nosuch");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'nosuch'"), std::string::npos);
  reg.Unregister("in");
  reg.Unregister("nosuch");  // no-op
  EXPECT_EQ(reg.GetStatus("")->size(), 1u);
  reg.UnregisterAll();
  EXPECT_TRUE(reg.GetStatus("")->empty());
}

TEST(SharedMemoryRegistry, ReadsInputsAndWritesOutputs) {
  ShmObject obj(Key("b"), 64);
  SharedMemoryRegistry reg;
  ASSERT_TRUE(reg.Register("r", Key("b"), 16, 128).ok());  // elements 4..35
  auto t = reg.InputTensor({"r", 8, 16}, DataType::kInt32, {1, 4}, "input 'x'");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->data<int32_t>()[0], 6);
  EXPECT_EQ(t->data<int32_t>()[3], 9);
  auto view = reg.OutputView({"r", 0, 16}, "output 'y'");
  ASSERT_TRUE(view.ok());
  Tensor out = Tensor::Allocate(DataType::kInt32, {4});
  for (int i = 0; i < 4; ++i) out.data<int32_t>()[i] = 100 + i;
  ASSERT_TRUE(WriteSharedMemoryOutput(*view, out, "y").ok());
  EXPECT_EQ(obj.Read(4), 100);
  EXPECT_EQ(obj.Read(7), 103);
  EXPECT_EQ(obj.Read(8), 8);
  Tensor big = Tensor::Allocate(DataType::kInt32, {5});
  auto small = WriteSharedMemoryOutput(*view, big, "y");
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.message().find("too small"), std::string::npos);
}

TEST(SharedMemoryRegistry, ChecksBounds) {
  ShmObject obj(Key("c"), 16);  // 64 bytes
  SharedMemoryRegistry reg;
  auto beyond = reg.Register("r", Key("c"), 32, 64);
  ASSERT_FALSE(beyond.ok());
  EXPECT_NE(beyond.message().find("exceeds the 64 bytes"), std::string::npos);
  EXPECT_FALSE(reg.Register("r", Key("nosuchkey"), 0, 4).ok());
  EXPECT_FALSE(reg.Register("r", Key("c"), 0, 0).ok());
  ASSERT_TRUE(reg.Register("r", Key("c"), 0, 64).ok());
  auto past = reg.InputTensor({"r", 60, 8}, DataType::kInt32, {2}, "input 'x'");
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(past.status().message().find("exceeds the 64 bytes of region 'r'"), std::string::npos);
  auto mismatch = reg.InputTensor({"r", 0, 12}, DataType::kInt32, {2}, "input 'x'");
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("needs 8"), std::string::npos);
  auto unknown = reg.InputTensor({"zz", 0, 8}, DataType::kInt32, {2}, "input 'x'");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown shared memory region 'zz'"),
            std::string::npos);
  // Misaligned for int32: a copy, same values.
  auto odd = reg.InputTensor({"r", 2, 4}, DataType::kInt32, {1}, "input 'x'");
  ASSERT_TRUE(odd.ok());
  int32_t expect;
  const int32_t words[2] = {0, 1};
  std::memcpy(&expect, reinterpret_cast<const char*>(words) + 2, 4);
  EXPECT_EQ(odd->data<int32_t>()[0], expect);
}

TEST(SharedMemoryRegistry, ReadOnlyRegionRejectsOutputs) {
  if (geteuid() == 0) GTEST_SKIP() << "root opens read-only objects read-write";
  ShmObject obj(Key("d"), 16, 0400);
  SharedMemoryRegistry reg;
  ASSERT_TRUE(reg.Register("r", Key("d"), 0, 64).ok());
  EXPECT_TRUE(reg.InputTensor({"r", 0, 64}, DataType::kInt32, {16}, "input 'x'").ok());
  auto out = reg.OutputView({"r", 0, 64}, "output 'y'");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("read-only"), std::string::npos);
}

TEST(SharedMemoryRegistry, UnregisterKeepsInFlightViewsAlive) {
  SharedMemoryRegistry reg;
  Tensor t;
  {
    ShmObject obj(Key("e"), 16);
    ASSERT_TRUE(reg.Register("r", Key("e"), 0, 64).ok());
    auto in = reg.InputTensor({"r", 0, 64}, DataType::kInt32, {16}, "input 'x'");
    ASSERT_TRUE(in.ok());
    t = *in;
    reg.UnregisterAll();
  }  // object unlinked too: the mapping still holds the pages
  EXPECT_EQ(t.data<int32_t>()[15], 15);
  EXPECT_FALSE(reg.InputTensor({"r", 0, 64}, DataType::kInt32, {16}, "input 'x'").ok());
}

}  // namespace
}  // namespace inferd::server
