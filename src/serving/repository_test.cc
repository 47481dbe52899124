#include "serving/repository.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "serving/test_models.h"

namespace inferd::serving {
namespace {

namespace fs = std::filesystem;

TEST(RepositoryTest, ModelNames) {
  EXPECT_TRUE(IsValidModelName("resnet50"));
  EXPECT_TRUE(IsValidModelName("a.b-c_1"));
  EXPECT_FALSE(IsValidModelName(""));
  EXPECT_FALSE(IsValidModelName(".hidden"));
  EXPECT_FALSE(IsValidModelName("../up"));
  EXPECT_FALSE(IsValidModelName("a/b"));
}

TEST(RepositoryTest, ListsModelAndVersionFolders) {
  const fs::path repo = testing::FreshRepository("repository_");
  testing::WriteFile(repo / "b" / "3" / "model.onnx", "x");
  testing::WriteFile(repo / "b" / "12" / "model.onnx", "x");
  testing::WriteFile(repo / "b" / "0" / "model.onnx", "x");        // versions start at 1
  testing::WriteFile(repo / "b" / "v2" / "model.onnx", "x");       // not a number
  testing::WriteFile(repo / "b" / "1234567890123456789" / "m", "x");  // 19 digits
  testing::WriteFile(repo / "b" / "7", "a file, not a folder");
  testing::WriteFile(repo / "a" / "config.pbtxt", "");
  testing::WriteFile(repo / ".git" / "HEAD", "");
  testing::WriteFile(repo / "README", "");
  EXPECT_EQ(ListModelFolders(repo), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ListVersionFolders(repo / "b"), (std::vector<int64_t>{3, 12}));
  EXPECT_TRUE(HasModelFolder(repo, "a"));
  EXPECT_FALSE(HasModelFolder(repo, ".git"));
  EXPECT_FALSE(HasModelFolder(repo, "README"));
  EXPECT_FALSE(HasModelFolder(repo, "b/3"));
  EXPECT_EQ(ScanModelFolders(repo / "missing").status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(ListModelFolders(repo / "missing").empty());
  std::string bytes;
  EXPECT_TRUE(ReadRepositoryFile(repo / "b" / "7", &bytes));
  EXPECT_EQ(bytes, "a file, not a folder");
  fs::remove_all(repo);
}

TEST(RepositoryTest, FingerprintChangesWithAnyFile) {
  const fs::path repo = testing::FreshRepository("fingerprint_");
  EXPECT_EQ(FolderFingerprint(repo / "m"), "");
  testing::WriteFile(repo / "m" / "1" / "model.onnx", "x");
  const std::string before = FolderFingerprint(repo / "m");
  EXPECT_EQ(FolderFingerprint(repo / "m"), before);
  testing::WriteFile(repo / "m" / "2" / "model.onnx", "x");
  EXPECT_NE(FolderFingerprint(repo / "m"), before);
  fs::remove_all(repo);
}

TEST(RepositoryTest, VersionPolicy) {
  const std::vector<int64_t> on_disk{1, 2, 5};
  inference::ModelVersionPolicy latest;  // unset: latest 1
  EXPECT_EQ(SelectVersions(latest, on_disk, "m").chosen, (std::vector<int64_t>{5}));
  latest.mutable_latest()->set_num_versions(2);
  EXPECT_EQ(SelectVersions(latest, on_disk, "m").chosen, (std::vector<int64_t>{2, 5}));
  latest.mutable_latest()->set_num_versions(9);
  EXPECT_EQ(SelectVersions(latest, on_disk, "m").chosen, on_disk);
  EXPECT_TRUE(SelectVersions(latest, {}, "m").chosen.empty());

  inference::ModelVersionPolicy all;
  all.mutable_all();
  EXPECT_EQ(SelectVersions(all, on_disk, "m").chosen, on_disk);

  inference::ModelVersionPolicy specific;
  specific.mutable_specific()->add_versions(5);
  specific.mutable_specific()->add_versions(3);
  const VersionSelection s = SelectVersions(specific, on_disk, "m");
  EXPECT_EQ(s.chosen, (std::vector<int64_t>{5}));
  ASSERT_EQ(s.missing.count(3), 1u);
  EXPECT_EQ(s.missing.at(3), "version folder m/3 does not exist");
}

}  // namespace
}  // namespace inferd::serving
