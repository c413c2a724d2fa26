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
  std::string why;
  std::string made = make_own_job_dir((t.path / "name").string(), "id-1", why);
  EXPECT_EQ(made, (t.path / "name" / "id-1").string()) << why;
  EXPECT_TRUE(fs::is_directory(made));
  EXPECT_EQ(make_own_job_dir((t.path / "name").string(), "id-1", why), "");
  EXPECT_THAT(why, HasSubstr("already exists"));
}

// Found by review: a directory of this user that others may write to lets them rename the new
// directory and put a link in its place before the job's files are opened by path.
TEST(JobDirTest, ADirectoryOthersCanWriteToIsRefusedUnlessSticky) {
  TempDir t;
  fs::path name = t.path / "shared";
  fs::create_directories(name);
  ASSERT_EQ(::chmod(name.c_str(), 0777), 0);
  std::string why;
  EXPECT_EQ(make_own_job_dir(name.string(), "id-1", why), "");
  EXPECT_THAT(why, HasSubstr("writable by other users"));
  EXPECT_FALSE(fs::exists(name / "id-1"));
  ASSERT_EQ(::chmod(name.c_str(), 01777), 0);
  EXPECT_NE(make_own_job_dir(name.string(), "id-1", why), "") << why;
}

TEST(JobDirTest, ASymlinkAtTheNameLevelIsRefused) {
  TempDir t;
  fs::create_directories(t.path / "elsewhere");
  fs::create_directory_symlink(t.path / "elsewhere", t.path / "link");
  std::string why;
  EXPECT_EQ(make_own_job_dir((t.path / "link").string(), "id-1", why), "");
  EXPECT_THAT(why, HasSubstr("symbolic link"));
  EXPECT_FALSE(fs::exists(t.path / "elsewhere" / "id-1"));
}

}  // namespace
}  // namespace bridge
