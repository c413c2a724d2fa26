// `${VAR}` expansion (expand.h): env values and executor paths, at plan time.
#include "model/expand.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "system/host_env.h"
#include "tests/support/map_environment.h"

namespace bridge {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class ExpandTest : public ::testing::Test {
 protected:
  MapEnvironment env_{std::map<std::string, std::string>{
      {"USER", "alice"}, {"HOME", "/home/alice"}, {"EMPTY", ""}, {"KEY_2", "k2"}}};
  SourceLoc loc_{"r.yaml", 7, 9, {}};
  Diagnostics diags_;

  std::optional<std::string> expand(const std::string& text,
                                    std::vector<std::string>* names = nullptr) {
    return expand_vars(text, env_, "env.X", loc_, diags_, names);
  }
};

TEST_F(ExpandTest, ExpandsBracedVariables) {
  std::vector<std::string> names;
  EXPECT_EQ(expand("/scratch/${USER}/run-${KEY_2}", &names), "/scratch/alice/run-k2");
  EXPECT_THAT(names, ElementsAre("USER", "KEY_2"));
  EXPECT_EQ(expand("${USER}${USER}"), "alicealice");
  EXPECT_EQ(expand("[${EMPTY}]"), "[]");  // set but empty is not unset
  EXPECT_EQ(expand("plain text"), "plain text");
  EXPECT_EQ(expand(""), "");
  EXPECT_THAT(diags_.items(), IsEmpty());
}

TEST_F(ExpandTest, UnsetVariableIsAnErrorNamingIt) {
  EXPECT_EQ(expand("a${NOPE}b"), std::nullopt);
  ASSERT_EQ(diags_.items().size(), 1u);
  const Diagnostic& d = diags_.items()[0];
  EXPECT_EQ(d.severity, Severity::kError);
  EXPECT_EQ(d.code, "unset-variable");
  EXPECT_EQ(d.path, "env.X");
  EXPECT_THAT(d.message, HasSubstr("${NOPE}"));
  EXPECT_THAT(d.message, HasSubstr("unset"));
  EXPECT_THAT(d.help, HasSubstr("export NOPE"));
  EXPECT_THAT(d.help, HasSubstr("$${NOPE}"));
  EXPECT_EQ(d.loc.file, "r.yaml");
  EXPECT_EQ(d.loc.line, 7);
  EXPECT_EQ(d.loc.column, 9);
}

TEST_F(ExpandTest, EveryUnsetVariableIsReported) {
  EXPECT_EQ(expand("${A1}-${USER}-${B2}"), std::nullopt);
  ASSERT_EQ(diags_.count(Severity::kError), 2u);
  EXPECT_THAT(diags_.items()[0].message, HasSubstr("${A1}"));
  EXPECT_THAT(diags_.items()[1].message, HasSubstr("${B2}"));
}

TEST_F(ExpandTest, DoubleDollarIsALiteral) {
  EXPECT_EQ(expand("$${USER}"), "${USER}");
  EXPECT_EQ(expand("$${NOT_SET_ANYWHERE}"), "${NOT_SET_ANYWHERE}");
  EXPECT_EQ(expand("${USER}:$${USER}"), "alice:${USER}");
  EXPECT_THAT(diags_.items(), IsEmpty());
}

TEST_F(ExpandTest, OtherDollarFormsAreUntouched) {
  for (const char* text : {"$(hostname)", "$HOME", "$USER/x", "`date`", "${", "${unclosed",
                           "${1ABC}", "${A B}", "${}", "$", "price: 5$", "$$", "${USER-default}"}) {
    std::vector<std::string> names;
    EXPECT_EQ(expand(text, &names), std::string(text)) << text;
    EXPECT_THAT(names, IsEmpty()) << text;
  }
  EXPECT_THAT(diags_.items(), IsEmpty());
}

TEST_F(ExpandTest, TildeExpandsInPaths) {
  EXPECT_EQ(expand_path("~/jobs", env_, "executor.slurm.job_dir", loc_, diags_),
            "/home/alice/jobs");
  EXPECT_EQ(expand_path("~", env_, "executor.slurm.job_dir", loc_, diags_), "/home/alice");
  EXPECT_EQ(expand_path("/lustre/${USER}/jobs", env_, "p", loc_, diags_), "/lustre/alice/jobs");
  // Only a leading "~/" or a lone "~" is the home directory.
  EXPECT_EQ(expand_path("~bob/jobs", env_, "p", loc_, diags_), "~bob/jobs");
  EXPECT_EQ(expand_path("/a/~/b", env_, "p", loc_, diags_), "/a/~/b");
  EXPECT_THAT(diags_.items(), IsEmpty());
}

TEST_F(ExpandTest, TildeWithoutHomeIsAnError) {
  MapEnvironment no_home(std::map<std::string, std::string>{{"USER", "alice"}});
  EXPECT_EQ(expand_path("~/jobs", no_home, "executor.local.job_dir", loc_, diags_), std::nullopt);
  ASSERT_EQ(diags_.items().size(), 1u);
  EXPECT_EQ(diags_.items()[0].code, "unset-variable");
  EXPECT_EQ(diags_.items()[0].path, "executor.local.job_dir");
  EXPECT_THAT(diags_.items()[0].message, HasSubstr("HOME"));
}

TEST_F(ExpandTest, ProcessEnvironmentReadsTheRealEnvironment) {
  ProcessEnvironment process;
  ASSERT_EQ(setenv("BRIDGE_EXPAND_TEST_VAR", "from-process", 1), 0);
  EXPECT_EQ(expand_vars("${BRIDGE_EXPAND_TEST_VAR}", process, "p", loc_, diags_), "from-process");
  unsetenv("BRIDGE_EXPAND_TEST_VAR");
  EXPECT_EQ(expand_vars("${BRIDGE_EXPAND_TEST_VAR}", process, "p", loc_, diags_), std::nullopt);
}

}  // namespace
}  // namespace bridge
