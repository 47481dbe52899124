#include "batchjob/inputs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "batchjob/item_reader.h"
#include "common/npy.h"

namespace inferd::batchjob {
namespace {

namespace fs = std::filesystem;

class InputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("batchjob_inputs_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
  }
  fs::path dir_;
};

TEST_F(InputsTest, DirectoryListsRegularFilesSortedWithoutHiddenOrFolders) {
  Write("b.jpg", "B");
  Write("a.jpg", "A");
  Write(".hidden", "H");
  fs::create_directories(dir_ / "sub");
  Write("sub/c.jpg", "C");
  auto items = ListInputs(dir_.string());
  ASSERT_TRUE(items.ok()) << items.status().message();
  ASSERT_EQ(items->size(), 2u);
  EXPECT_EQ((*items)[0].id, "a.jpg");
  EXPECT_EQ((*items)[1].id, "b.jpg");
  EXPECT_EQ((*items)[0].source, (dir_ / "a.jpg").string());
  EXPECT_EQ((*items)[0].kind, InputItem::Kind::kFile);
}

TEST_F(InputsTest, EmptyDirectoryAndMissingPathAreErrors) {
  auto empty = ListInputs(dir_.string());
  EXPECT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("has no files"), std::string::npos);
  auto missing = ListInputs((dir_ / "nope").string());
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("does not exist"), std::string::npos);
}

TEST_F(InputsTest, GlobMatchesFilesSorted) {
  Write("x2.npy", "");
  Write("x1.npy", "");
  Write("y.txt", "");
  auto items = ListInputs((dir_ / "x*.npy").string());
  ASSERT_TRUE(items.ok()) << items.status().message();
  ASSERT_EQ(items->size(), 2u);
  EXPECT_EQ((*items)[0].path.filename(), "x1.npy");
  auto none = ListInputs((dir_ / "z*").string());
  EXPECT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no input file matches"), std::string::npos);
}

TEST_F(InputsTest, JsonlListsNonBlankLinesWithLineNumbers) {
  Write("req.jsonl", "{\"a\":1}\n\n  \n{bad\r\n{\"c\":3}");
  auto items = ListInputs((dir_ / "req.jsonl").string());
  ASSERT_TRUE(items.ok()) << items.status().message();
  ASSERT_EQ(items->size(), 3u);
  EXPECT_EQ((*items)[0].line, 1);
  EXPECT_EQ((*items)[1].line, 4);
  EXPECT_EQ((*items)[1].text, "{bad");  // \r stripped
  EXPECT_EQ((*items)[2].line, 5);
  EXPECT_EQ((*items)[2].source, (dir_ / "req.jsonl").string() + ":5");
}

TEST_F(InputsTest, UnreadableFileIsListedAndFailsWhenRead) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file";
  Write("locked.bin", "x");
  ::chmod((dir_ / "locked.bin").c_str(), 0);
  auto items = ListInputs(dir_.string());
  ASSERT_TRUE(items.ok());
  ASSERT_EQ(items->size(), 1u);
  auto bytes = ReadFileBytes((*items)[0].path);
  EXPECT_FALSE(bytes.ok());
  EXPECT_NE(bytes.status().message().find("Permission denied"), std::string::npos);
}

ModelInputInfo OneInput(DataType dtype, std::vector<int64_t> dims, bool batching) {
  ModelInputInfo info;
  info.inputs.push_back({"x", dtype, std::move(dims)});
  info.batching = batching;
  return info;
}

TEST_F(InputsTest, FileBytesFeedABytesInputWithABatchDim) {
  Write("img.jpg", std::string("\xff\xd8\0z", 4));
  InputItem item{InputItem::Kind::kFile, (dir_ / "img.jpg").string(), "img.jpg",
                 dir_ / "img.jpg", 0, ""};
  std::string id;
  auto inputs = ReadItem(item, OneInput(DataType::kString, {1}, true), &id);
  ASSERT_TRUE(inputs.ok()) << inputs.status().message();
  EXPECT_EQ(id, "\"img.jpg\"");
  ASSERT_EQ(inputs->size(), 1u);
  const Tensor& t = (*inputs)[0].tensor;
  EXPECT_EQ(t.shape(), (Shape{1, 1}));
  EXPECT_EQ(t.data<std::string>()[0], std::string("\xff\xd8\0z", 4));
}

TEST_F(InputsTest, NpyFeedsANumericInputAndOtherFilesDoNot) {
  ASSERT_TRUE(SaveNpy(Tensor::FromVector<float>({1, 2, 3, 4}, {4}), dir_ / "a.npy").ok());
  Write("a.txt", "hello");
  ModelInputInfo info = OneInput(DataType::kFloat32, {4}, true);
  std::string id;
  InputItem npy{InputItem::Kind::kFile, "a.npy", "a.npy", dir_ / "a.npy", 0, ""};
  auto inputs = ReadItem(npy, info, &id);
  ASSERT_TRUE(inputs.ok()) << inputs.status().message();
  EXPECT_EQ((*inputs)[0].tensor.shape(), (Shape{1, 4}));
  InputItem txt{InputItem::Kind::kFile, "a.txt", "a.txt", dir_ / "a.txt", 0, ""};
  auto refused = ReadItem(txt, info, &id);
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("only as a .npy file"), std::string::npos);
  Write("bad.npy", "not npy");
  InputItem bad{InputItem::Kind::kFile, "bad.npy", "bad.npy", dir_ / "bad.npy", 0, ""};
  EXPECT_FALSE(ReadItem(bad, info, &id).ok());
}

InputItem Line(std::string text, int64_t line = 3) {
  InputItem item;
  item.kind = InputItem::Kind::kJsonLine;
  item.source = "req.jsonl:" + std::to_string(line);
  item.line = line;
  item.text = std::move(text);
  return item;
}

TEST(ItemReaderTest, JsonLineGivesTensorsShapedByNesting) {
  ModelInputInfo info;
  info.batching = true;
  info.inputs = {{"x", DataType::kFloat32, {2, 2}},
                 {"n", DataType::kInt64, {}},
                 {"s", DataType::kString, {-1}}};
  std::string id;
  auto inputs = ReadItem(
      Line(R"({"id": "r1", "inputs": {"x": [[1, 2.5], [3, 4]], "n": 7, "s": ["a", "b", "c"]}})"),
      info, &id);
  ASSERT_TRUE(inputs.ok()) << inputs.status().message();
  EXPECT_EQ(id, "\"r1\"");
  ASSERT_EQ(inputs->size(), 3u);
  EXPECT_EQ((*inputs)[0].tensor.shape(), (Shape{1, 2, 2}));
  EXPECT_FLOAT_EQ((*inputs)[0].tensor.data<float>()[1], 2.5f);
  EXPECT_EQ((*inputs)[1].tensor.shape(), (Shape{1}));
  EXPECT_EQ((*inputs)[1].tensor.data<int64_t>()[0], 7);
  EXPECT_EQ((*inputs)[2].tensor.shape(), (Shape{1, 3}));
  EXPECT_EQ((*inputs)[2].tensor.data<std::string>()[2], "c");
}

TEST(ItemReaderTest, JsonLineErrorsNameTheLineAndReason) {
  ModelInputInfo info;
  info.batching = false;
  info.inputs = {{"x", DataType::kInt8, {-1}}};
  struct Case {
    const char* line;
    const char* expect;
  } cases[] = {
      {"{not json", "malformed JSON at column"},
      {"[1, 2]", "must be a JSON object"},
      {R"({"id": 1})", "needs an \"inputs\" object"},
      {R"({"inputs": {"y": [1]}})", "unknown input 'y' (model inputs: x)"},
      {R"({"inputs": {"x": [[1, 2], [3]]}})", "ragged nested lists"},
      {R"({"inputs": {"x": [1, 300]}})", "element 1: expected an integer that fits"},
      {R"({"inputs": {"x": [1.5]}})", "expected an integer"},
      {R"({"inputs": {"x": ["a"]}})", "expected an integer"},
      {R"({"id": [1], "inputs": {}})", "\"id\" must be a string or an integer"},
  };
  for (const Case& c : cases) {
    std::string id;
    auto inputs = ReadItem(Line(c.line, 9), info, &id);
    ASSERT_FALSE(inputs.ok()) << c.line;
    EXPECT_NE(inputs.status().message().find("req.jsonl:9"), std::string::npos)
        << inputs.status().message();
    EXPECT_NE(inputs.status().message().find(c.expect), std::string::npos)
        << c.line << " -> " << inputs.status().message();
  }
  std::string id;
  ASSERT_FALSE(ReadItem(Line("{bad", 4), info, &id).ok());
  EXPECT_EQ(id, "\"line 4\"");  // the default id survives a parse error
}

}  // namespace
}  // namespace inferd::batchjob
