#include "batchjob/output_file.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "batchjob/inputs.h"
#include "batchjob/records.h"

namespace inferd::batchjob {
namespace {

namespace fs = std::filesystem;

fs::path TempFile(const std::string& name) {
  fs::path p = fs::temp_directory_path() /
               ("batchjob_out_" + std::to_string(::getpid()) + "_" + name);
  fs::remove(p);
  return p;
}

serving::InferenceResponse Response() {
  serving::InferenceResponse r;
  r.outputs.emplace_back("y", Tensor::FromVector<float>({0.1f, -2.0f, 1e-7f}, {1, 3}));
  r.outputs.emplace_back("n", Tensor::FromVector<int64_t>({-5}, {1}));
  return r;
}

TEST(RecordsTest, RecordsAreOneJsonLineWithShortestFloats) {
  std::string rec = FormatRecord("\"a.npy\"", "dir/a.npy", Response());
  EXPECT_EQ(rec,
            "{\"id\":\"a.npy\",\"source\":\"dir/a.npy\",\"outputs\":{\"y\":{\"datatype\":\"FP32\","
            "\"shape\":[1,3],\"data\":[0.1,-2,1e-07]},\"n\":{\"datatype\":\"INT64\",\"shape\":[1],"
            "\"data\":[-5]}}}\n");
  std::string err = FormatErrorRecord("7", "req.jsonl:2", "bad \"x\"\n");
  EXPECT_EQ(err, "{\"id\":7,\"source\":\"req.jsonl:2\",\"error\":\"bad \\\"x\\\"\\n\"}\n");
  auto key = ParseRecordKey(std::string_view(err).substr(0, err.size() - 1));
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(key->source, "req.jsonl:2");
  EXPECT_TRUE(key->is_error);
}

TEST(RecordsTest, NonUtf8SourcesRoundTripThroughSourceKey) {
  std::string source = "imgs/caf\xe9.jpg";  // Latin-1 byte, not UTF-8
  std::string rec = FormatErrorRecord("1", source, "x");
  auto key = ParseRecordKey(std::string_view(rec).substr(0, rec.size() - 1));
  ASSERT_TRUE(key.ok()) << key.status().message();
  EXPECT_EQ(key->source, SourceKey(source));
  EXPECT_EQ(SourceKey("plain/\xc3\xa9.jpg"), "plain/\xc3\xa9.jpg");  // valid UTF-8 unchanged
}

TEST(OutputFileTest, ResumeTruncatesATornLastLineAndKeepsWholeRecords) {
  fs::path path = TempFile("torn.jsonl");
  std::string good = FormatRecord("\"a\"", "a", Response()) + FormatErrorRecord("\"b\"", "b", "no");
  std::string torn = FormatRecord("\"c\"", "c", Response());
  torn.resize(torn.size() / 2);
  std::ofstream(path, std::ios::binary) << good << torn;
  auto recovered = RecoverOutput(path);
  ASSERT_TRUE(recovered.ok()) << recovered.status().message();
  EXPECT_EQ(recovered->records, 2);
  EXPECT_EQ(recovered->errors, 1);
  EXPECT_EQ(recovered->done, (std::set<std::string>{"a", "b"}));
  EXPECT_EQ(recovered->truncated_bytes, static_cast<int64_t>(torn.size()));
  EXPECT_EQ(*ReadFileBytes(path), good);

  // Appending after recovery continues the file with whole lines.
  auto out = OutputFile::Open(path, /*truncate=*/false);
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE((*out)->Append(FormatErrorRecord("\"c\"", "c", "again")).ok());
  ASSERT_TRUE((*out)->Sync().ok());
  out->reset();
  auto again = RecoverOutput(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->records, 3);
  EXPECT_EQ(again->truncated_bytes, 0);
  fs::remove(path);
}

TEST(OutputFileTest, MissingFileIsAnEmptyJobAndForeignLinesAreRefused) {
  fs::path path = TempFile("foreign.jsonl");
  auto none = RecoverOutput(path);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->records, 0);
  std::ofstream(path, std::ios::binary) << FormatErrorRecord("1", "a", "x") << "hello world\n";
  auto foreign = RecoverOutput(path);
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("line 2 is not a record"), std::string::npos)
      << foreign.status().message();
  fs::remove(path);
}

TEST(OutputFileTest, DuplicateSourcesCountOnce) {
  fs::path path = TempFile("dup.jsonl");
  std::ofstream(path, std::ios::binary)
      << FormatErrorRecord("1", "a", "x") << FormatErrorRecord("1", "a", "x");
  auto recovered = RecoverOutput(path);
  ASSERT_TRUE(recovered.ok());
  EXPECT_EQ(recovered->records, 1);
  EXPECT_EQ(recovered->duplicates, 1);
  fs::remove(path);
}

}  // namespace
}  // namespace inferd::batchjob
