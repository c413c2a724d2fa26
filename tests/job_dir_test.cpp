// A submission's own directory in a shared job dir (executors/job_dir.h): what the `<name>`
// level must be before anything is created in it.
#include "executors/job_dir.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace bridge {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct TempDir {
  fs::path path =
      fs::temp_directory_path() / fs::path("bridge-jobdir-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

TEST(JobDirTest, ANewDirectoryInAnOwnDirectory) {
  TempDir t;
  StatusOr<std::string> made = make_own_job_dir((t.path / "name").string(), "id-1");
  ASSERT_TRUE(made.ok()) << made.why();
  EXPECT_EQ(*made, (t.path / "name" / "id-1").string());
  EXPECT_TRUE(fs::is_directory(*made));
  StatusOr<std::string> again = make_own_job_dir((t.path / "name").string(), "id-1");
  EXPECT_FALSE(again.ok());
  EXPECT_THAT(again.why(), HasSubstr("already exists"));
}

// Found by review: a directory of this user that others may write to lets them rename the new
// directory and put a link in its place before the job's files are opened by path.
TEST(JobDirTest, ADirectoryOthersCanWriteToIsRefusedUnlessSticky) {
  TempDir t;
  fs::path name = t.path / "shared";
  fs::create_directories(name);
  ASSERT_EQ(::chmod(name.c_str(), 0777), 0);
  StatusOr<std::string> refused = make_own_job_dir(name.string(), "id-1");
  EXPECT_FALSE(refused.ok());
  EXPECT_THAT(refused.why(), HasSubstr("writable by other users"));
  EXPECT_FALSE(fs::exists(name / "id-1"));
  ASSERT_EQ(::chmod(name.c_str(), 01777), 0);
  StatusOr<std::string> sticky = make_own_job_dir(name.string(), "id-1");
  EXPECT_TRUE(sticky.ok()) << sticky.why();
}

TEST(JobDirTest, ASymlinkAtTheNameLevelIsRefused) {
  TempDir t;
  fs::create_directories(t.path / "elsewhere");
  fs::create_directory_symlink(t.path / "elsewhere", t.path / "link");
  StatusOr<std::string> refused = make_own_job_dir((t.path / "link").string(), "id-1");
  EXPECT_FALSE(refused.ok());
  EXPECT_THAT(refused.why(), HasSubstr("symbolic link"));
  EXPECT_FALSE(fs::exists(t.path / "elsewhere" / "id-1"));
}

}  // namespace
}  // namespace bridge
