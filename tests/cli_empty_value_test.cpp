// `--option=` with nothing after the '=' (issue 47, item 13): CLI11 took the next argument as
// the option's value, so `--runtime-check= recipe.yaml` lost its recipe and
// `--runtime-check= -e local` made `-e` the Python and `local` an override. An option that
// takes a value now gets the empty one, which it refuses as it refuses `--runtime-check ""`.
// Run through the real binary, like tests/cli_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/support/build_paths.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(CliEmptyValueTest, AnEmptyValueAfterTheEqualsSignTakesNoOtherArgument) {
  test::TempDir home;
  std::string state = home.path() + "/state";
  std::string recipe = std::string(BRIDGE_TEST_DATA) + "/recipes/full.yaml";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"validate", "--runtime-check=", recipe},
        {"validate", recipe, "--runtime-check=", "-e", "local"},
        {"plan", "--runtime-check=", recipe, "-e", "slurm"},
        {"--runtime-check=", "--dry-run", recipe},
        {"--runtime-check=", recipe}}) {
    std::vector<std::string> argv{BRIDGE_LAUNCH_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    test::ChildResult r =
        test::run_command(argv, {{"HOME", home.path()}, {"BRIDGE_LAUNCH_STATE_DIR", state}});
    std::string shown = ::testing::PrintToString(args);
    EXPECT_EQ(r.exit_code, 2) << shown << "\n" << r.err;
    EXPECT_EQ(r.out, "") << shown;
    EXPECT_THAT(r.err, HasSubstr("`runtime.check.python` (`--runtime-check`) is empty")) << shown;
    EXPECT_THAT(r.err, Not(HasSubstr("recipe is required"))) << shown;
    EXPECT_THAT(r.err, Not(HasSubstr("override 'local'"))) << shown;
    EXPECT_FALSE(std::filesystem::exists(state)) << shown << ": nothing is recorded";
  }
}

// The same for an option of a subcommand: `logs --grep= JOB` kept JOB as the pattern and said
// "job is required". A flag written with '=' is left as it was.
TEST(CliEmptyValueTest, SubcommandOptionsAndFlagsToo) {
  test::TempDir home;
  std::map<std::string, std::string> env{{"HOME", home.path()},
                                         {"BRIDGE_LAUNCH_STATE_DIR", home.path() + "/state"}};
  test::ChildResult logs = test::run_command({BRIDGE_LAUNCH_BIN, "logs", "--grep=", "nojob"}, env);
  EXPECT_THAT(logs.err, Not(HasSubstr("job is required"))) << logs.err;
  EXPECT_THAT(logs.err, HasSubstr("nojob")) << logs.err;
  std::string recipe = std::string(BRIDGE_TEST_DATA) + "/recipes/full.yaml";
  test::ChildResult dry =
      test::run_command({BRIDGE_LAUNCH_BIN, "--dry-run=", recipe, "-e", "slurm"}, env);
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_THAT(dry.out, HasSubstr("#SBATCH"));
}

}  // namespace
}  // namespace bridge
