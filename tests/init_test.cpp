// `bridge-launch init` (launcher/starter_recipe.h): the starter recipe passes `validate` unchanged
// for every shape and executor, -o never overwrites without --force, bad choices are usage
// errors; and the man page and completion know `init` and `advise`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "launcher/starter_recipe.h"
#include "model/executor_kind.h"
#include "model/recipe.h"
#include "tests/support/build_paths.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class InitTest : public ::testing::Test {
 protected:
  test::ChildResult run(const std::vector<std::string>& args) {
    std::vector<std::string> argv{BRIDGE_LAUNCH_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_command(argv, {{"HOME", home_.path()}});
  }
  std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  test::TempDir home_;
};

// The acceptance, then every shape x executor: stdout, saved unchanged, validates with no
// error and no warning.
TEST_F(InitTest, EveryShapeAndExecutorValidatesUnchanged) {
  std::vector<std::vector<std::string>> cases{
      {"init", "--shape", "moe", "-g", "h100", "-ng", "16"}};
  for (const char* shape : {"dense", "moe"})
    for (const std::string& executor : executor_names())
      for (const char* gpu : {"h100", "gb200", "h200"})
        cases.push_back({"init", "--shape", shape, "-g", gpu, "--executor", executor, "-ng",
                         find_executor_kind(executor)->runs_here ? "4" : "16"});
  cases.push_back({"init"});
  int n = 0;
  for (const auto& args : cases) {
    std::string what = ::testing::PrintToString(args);
    auto r = run(args);
    ASSERT_EQ(r.exit_code, 0) << what << "\n" << r.err;
    EXPECT_EQ(r.err, "") << what;
    std::string file = home_.write("starter" + std::to_string(n++) + ".yaml", r.out);
    auto v = run({"validate", file});
    EXPECT_EQ(v.exit_code, 0) << what << "\n" << v.err << "\n" << r.out;
    EXPECT_THAT(v.out, HasSubstr("ok (0 warnings)")) << what << "\n" << v.err;
    // Infos (a Kubernetes job dir that goes away with the pods) may stay; nothing worse.
    EXPECT_THAT(v.err, Not(HasSubstr("warning:"))) << what;
    EXPECT_THAT(v.err, Not(HasSubstr("error:"))) << what;
    // Its executor's own section is there, with the keys a user changes first.
    auto at = std::find(args.begin(), args.end(), "--executor");
    if (at != args.end()) {
      EXPECT_THAT(r.out, HasSubstr("\n  " + *(at + 1) + ":")) << what;
    }
  }
}

TEST_F(InitTest, TheMoeStarterHasTheAskedLayoutAndItsEpOverlapIsOneKnobAway) {
  auto r = run({"init", "--shape", "moe", "-g", "h100", "-ng", "16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("num_gpus: 16"));
  EXPECT_THAT(r.out, HasSubstr("gpus_per_node: 8"));
  EXPECT_THAT(r.out, HasSubstr("expert_model_parallel_size: 16"));
  EXPECT_THAT(r.out, HasSubstr("default: slurm"));
  std::string file = home_.write("moe.yaml", r.out);
  auto plan = run({"plan", "--format", "json", file});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_THAT(plan.out, HasSubstr("\"nodes\": 2"));
  // Every EP-overlap prerequisite already holds: turning it on is valid as is...
  auto on = run({"validate", file, "comm_overlap.overlap_moe_expert_parallel_comm=true"});
  EXPECT_EQ(on.exit_code, 0) << on.err;
  // ...and advise suggests it with a command that runs.
  auto advise = run({"advise", file});
  ASSERT_EQ(advise.exit_code, 0) << advise.err;
  EXPECT_THAT(advise.out, HasSubstr("[suggested] MoE expert-parallel overlap"));
}

TEST_F(InitTest, EveryKeyHasAComment) {
  for (const char* shape : {"dense", "moe"}) {
    StarterChoices c;
    c.shape = shape;
    StarterRecipe s = starter_recipe(c);
    ASSERT_EQ(s.problem, "");
    std::istringstream in(s.text);
    int keys = 0;
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      ++keys;
      bool section = std::regex_match(line, std::regex("[a-z_]+:( +#.*)?"));
      if (section && line.find('#') == std::string::npos) continue;  // e.g. `model:`
      EXPECT_NE(line.find(" # "), std::string::npos) << shape << ": " << line;
    }
    EXPECT_GT(keys, 30) << shape;
  }
}

TEST_F(InitTest, OutputFileIsNeverOverwrittenWithoutForce) {
  std::string path = home_.path() + "/r.yaml";
  auto first = run({"init", "-o", path});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, "");
  EXPECT_THAT(first.err, HasSubstr("wrote " + path));
  EXPECT_THAT(read(path), HasSubstr("name: llama3-8b-dense"));
  auto again = run({"init", "--shape", "moe", "-o", path});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_THAT(again.err, HasSubstr("exists; not overwritten"));
  EXPECT_THAT(again.err, HasSubstr("--force"));
  EXPECT_THAT(read(path), HasSubstr("name: llama3-8b-dense"));
  auto forced = run({"init", "--shape", "moe", "-o", path, "--force"});
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_THAT(read(path), HasSubstr("name: qwen3-30b-a3b-moe"));
  EXPECT_EQ(run({"validate", path}).exit_code, 0);
}

TEST_F(InitTest, BadChoicesAreUsageErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const auto& c : std::vector<Case>{
           {{"init", "-g", "h10"}, "unknown GPU type `h10` (did you mean `h100`?)"},
           {{"init", "--executor", "local", "-ng", "16"},
            "the local executor runs on this machine"},
           {{"init", "-ng", "12"}, "-ng 12 is not a multiple of the GPUs per node (8)"},
           {{"init", "--shape", "sparse"}, "--shape"},
           {{"init", "-ng", "0"}, "num-gpus"},
           {{"init", "extra.yaml"}, "extra.yaml"},
       }) {
    auto r = run(c.args);
    EXPECT_EQ(r.exit_code, 2) << ::testing::PrintToString(c.args) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_THAT(r.err, HasSubstr(c.message)) << ::testing::PrintToString(c.args);
  }
}

TEST(StarterRecipeTest, LayoutFollowsTheChoices) {
  StarterChoices c;
  c.shape = "moe";
  c.num_gpus = 12;
  c.gpus_per_node = 4;
  StarterRecipe s = starter_recipe(c);
  ASSERT_EQ(s.problem, "");
  EXPECT_THAT(s.text, HasSubstr("expert_model_parallel_size: 4 "));  // 12 = 4 x 3
  c.gpu = "gb200";
  c.num_gpus = 0;
  c.gpus_per_node = 0;
  s = starter_recipe(c);
  EXPECT_THAT(s.text, HasSubstr("gpus_per_node: 4 "));  // the GPU table's default
  EXPECT_THAT(s.text, HasSubstr("num_gpus: 4 "));
  c.shape = "dense";
  c.gpu = "h200";  // run_script.py does not take -g h200: a Hydra script instead
  s = starter_recipe(c);
  EXPECT_THAT(s.text, HasSubstr("adapter: hydra"));
  EXPECT_THAT(s.text, HasSubstr("tensor_model_parallel_size: 2 "));
  EXPECT_THAT(s.text, Not(HasSubstr("run_script.py]")));
}

// ---------------------------------------------------------------------------------------
// Docs and completion for init and advise (tests/cli_docs_test.cpp covers the others).

std::string man_page() {
  std::ifstream in(std::string(BRIDGE_SOURCE_DIR) + "/docs/man/bridge-launch.1");
  std::stringstream s;
  s << in.rdbuf();
  return std::regex_replace(s.str(), std::regex(R"(\\-)"), "-");
}

TEST_F(InitTest, ManPageHasEveryOptionOfInitAndAdvise) {
  std::string man = man_page();
  std::regex opt(R"((^|[\s,])(--?[a-zA-Z][a-zA-Z-]*))");
  for (const char* command : {"init", "advise"}) {
    auto r = run({command, "--help"});
    ASSERT_EQ(r.exit_code, 0);
    EXPECT_THAT(r.out, HasSubstr("Example"));
    EXPECT_NE(man.find(std::string("bridge-launch ") + command), std::string::npos) << command;
    std::istringstream lines(r.out);
    std::set<std::string> seen;
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("  -", 0) != 0) continue;
      for (std::sregex_iterator it(line.begin(), line.end(), opt), end; it != end; ++it)
        seen.insert((*it)[2]);
    }
    EXPECT_GT(seen.size(), 4u) << command;
    for (const auto& o : seen) EXPECT_NE(man.find(o), std::string::npos) << o << " of " << command;
  }
}

TEST_F(InitTest, BashCompletionKnowsInitAndAdvise) {
  auto r = run({"completion", "bash"});
  ASSERT_EQ(r.exit_code, 0);
  std::string script = home_.write("completion.bash", r.out);
  auto complete = [&](const std::string& words, int cword) {
    return test::run_command({"/bin/bash", "-c",
                              "source " + script + "; COMP_WORDS=(" + words +
                                  "); COMP_CWORD=" + std::to_string(cword) +
                                  "; _bridge_launch; printf '%s\\n' \"${COMPREPLY[@]}\""})
        .out;
  };
  EXPECT_EQ(complete("bridge-launch adv", 1), "advise\n");
  EXPECT_EQ(complete("bridge-launch in", 1), "init\n");
  EXPECT_EQ(complete("bridge-launch init --shape m", 3), "moe\n");
  EXPECT_THAT(complete("bridge-launch init --f", 2), HasSubstr("--force"));
  EXPECT_THAT(complete("bridge-launch advise --st", 2), HasSubstr("--strict"));
  EXPECT_EQ(complete("bridge-launch init -g gb3", 3), "gb300\n");
}

}  // namespace
}  // namespace bridge
