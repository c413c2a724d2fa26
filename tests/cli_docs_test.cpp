// The man page and the completion scripts stay in sync with the CLI.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "model/executor_kind.h"
#include "model/recipe_loader.h"
#include "tests/support/build_paths.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

using test::run_command;

const std::vector<std::string> kCommands{"validate", "plan", "plugins",    "list",    "status",
                                         "logs",     "why",  "cancel",     "compare", "ablate",
                                         "advise",   "init", "completion", "schema"};

std::string man_page() {
  std::ifstream in(std::string(BRIDGE_SOURCE_DIR) + "/docs/man/bridge-launch.1");
  std::stringstream s;
  s << in.rdbuf();
  // roff escapes dashes: "\-\-dry\-run" is "--dry-run".
  return std::regex_replace(s.str(), std::regex(R"(\\-)"), "-");
}

std::set<std::string> options_in_help(const std::string& help) {
  std::set<std::string> out;
  std::regex opt(R"((^|[\s,])(--?[a-zA-Z][a-zA-Z-]*))");
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("  -", 0) != 0) continue;  // option rows only, not examples
    for (std::sregex_iterator it(line.begin(), line.end(), opt), end; it != end; ++it)
      out.insert((*it)[2]);
  }
  return out;
}

TEST(CliDocsTest, EveryOptionOfEveryCommandIsInTheManPage) {
  std::string man = man_page();
  ASSERT_FALSE(man.empty());
  std::vector<std::vector<std::string>> invocations{{BRIDGE_LAUNCH_BIN, "--help"}};
  for (const auto& c : kCommands) invocations.push_back({BRIDGE_LAUNCH_BIN, c, "--help"});
  size_t checked = 0;
  for (const auto& argv : invocations) {
    auto r = run_command(argv);
    ASSERT_EQ(r.exit_code, 0) << argv[1];
    for (const auto& opt : options_in_help(r.out)) {
      EXPECT_NE(man.find(opt), std::string::npos) << opt << " (from " << argv[1] << " --help)";
      ++checked;
    }
  }
  EXPECT_GT(checked, 20u);
  for (const auto& c : kCommands) EXPECT_NE(man.find("bridge-launch " + c), std::string::npos) << c;
}

TEST(CliDocsTest, EveryCommandHelpHasAnExample) {
  for (const auto& c : kCommands) {
    auto r = run_command({BRIDGE_LAUNCH_BIN, c, "--help"});
    EXPECT_THAT(r.out, ::testing::HasSubstr("Example")) << c;
  }
}

// Writes `bridge-launch completion SHELL` to a file and returns its path.
std::string completion_file(const std::string& shell) {
  auto r = run_command({BRIDGE_LAUNCH_BIN, "completion", shell});
  EXPECT_EQ(r.exit_code, 0) << shell;
  // A directory per test process (removed at its exit): ctest runs the completion tests side
  // by side, and a test that sources the script while another rewrites it completes nothing.
  static const test::TempDir dir;
  std::string path = dir.path() + "/bl-completion." + shell;
  std::ofstream(path) << r.out;
  return path;
}

bool have_shell(const std::string& shell) {
  return run_command({"/bin/sh", "-c", "command -v " + shell}).exit_code == 0;
}

// COMPREPLY of _bridge_launch for COMP_WORDS=(`words`) and COMP_CWORD=`cword`, one per line.
// `setup` runs first (e.g. to change COMP_WORDBREAKS).
std::string bash_complete(const std::string& script, const std::string& words, int cword,
                          const std::string& setup = "") {
  return run_command({"/bin/bash", "-c",
                      "source " + script + "; " + setup + " COMP_WORDS=(" + words +
                          "); COMP_CWORD=" + std::to_string(cword) +
                          "; _bridge_launch; printf '%s\\n' \"${COMPREPLY[@]}\""})
      .out;
}

TEST(CliDocsTest, BashCompletionIsValidAndCompletesSubcommands) {
  std::string script = completion_file("bash");
  EXPECT_EQ(run_command({"/bin/bash", "-n", script}).exit_code, 0);
  auto complete = [&](const std::string& words, int cword) {
    return bash_complete(script, words, cword);
  };
  EXPECT_EQ(complete("bridge-launch sta", 1), "status\n");
  EXPECT_THAT(complete("bridge-launch va", 1), ::testing::HasSubstr("validate"));
  EXPECT_EQ(complete("bridge-launch sch", 1), "schema\n");
  EXPECT_EQ(complete("bridge-launch --executor k", 2), "kubernetes\n");
  EXPECT_EQ(complete("bridge-launch completion z", 2), "zsh\n");
  EXPECT_EQ(complete("bridge-launch completion f", 2), "fish\n");
  EXPECT_THAT(complete("bridge-launch plan --for", 2), ::testing::HasSubstr("--format"));
  EXPECT_EQ(complete("bridge-launch schema --format ''", 3), "json\n");
}

// Recipe overrides: sections, KEY= words from the loader's key reference, values after `=`.
TEST(CliDocsTest, BashCompletionCompletesRecipeKeysAndValues) {
  std::string script = completion_file("bash");
  auto complete = [&](const std::string& words, int cword) {
    return bash_complete(script, words, cword);
  };
  EXPECT_EQ(complete("bridge-launch r.yaml model.ten", 2), "model.tensor_model_parallel_size=\n");
  EXPECT_EQ(complete("bridge-launch plan r.yaml model.ten", 3),
            "model.tensor_model_parallel_size=\n");
  EXPECT_EQ(complete("bridge-launch ablate r.yaml --vary model.ten", 4),
            "model.tensor_model_parallel_size=\n");
  // Every comm_overlap key of the loader, nothing else.
  std::string overlap = complete("bridge-launch r.yaml comm_overlap.", 2);
  size_t overlap_keys = 0;
  for (const auto& k : recipe_key_reference()) {
    if (k.path.rfind("comm_overlap.", 0) != 0) continue;
    ++overlap_keys;
    EXPECT_THAT(overlap, ::testing::HasSubstr(k.path + "=\n")) << k.path;
  }
  EXPECT_EQ(std::count(overlap.begin(), overlap.end(), '\n'), static_cast<long>(overlap_keys));
  EXPECT_THAT(complete("bridge-launch r.yaml comm_ov", 2), ::testing::HasSubstr("comm_overlap.\n"));
  EXPECT_THAT(complete("bridge-launch r.yaml plugins.perf", 2),
              ::testing::HasSubstr("plugins.perf_env=\n"));
  // bash splits KEY=VALUE at '=' (COMP_WORDBREAKS): the words arrive as KEY, =, VALUE.
  EXPECT_EQ(complete("bridge-launch r.yaml model.moe_token_dispatcher_type =", 3),
            "allgather\nalltoall\nflex\n");
  EXPECT_EQ(complete("bridge-launch r.yaml model.moe_token_dispatcher_type = al", 4),
            "allgather\nalltoall\n");
  EXPECT_EQ(complete("bridge-launch r.yaml model.precision = ''", 4), "bf16\nfp16\nfp32\n");
  EXPECT_EQ(complete("bridge-launch r.yaml model.sequence_parallel = ''", 4), "true\nfalse\n");
  EXPECT_EQ(complete("bridge-launch r.yaml executor.default = ''", 4),
            "local\nslurm\nkubernetes\n");
  EXPECT_EQ(complete("bridge-launch r.yaml cluster.gpu = gb", 4), "gb200\ngb300\n");
  EXPECT_EQ(complete("bridge-launch r.yaml model.tensor_model_parallel_size = ''", 4), "\n");
  EXPECT_EQ(complete("bridge-launch ablate r.yaml --vary comm_overlap.tp_comm_overlap = t", 6),
            "true\n");
  // Without '=' in COMP_WORDBREAKS the word stays whole, and so do the completions.
  EXPECT_EQ(bash_complete(script, "bridge-launch r.yaml model.moe_token_dispatcher_type=fl", 2,
                          "COMP_WORDBREAKS=\"${COMP_WORDBREAKS//=/}\";"),
            "model.moe_token_dispatcher_type=flex\n");
}

TEST(CliDocsTest, ZshCompletionLoadsThroughBashcompinit) {
  std::string script = completion_file("zsh");
  std::string text = test::read_file(script);
  EXPECT_THAT(text, ::testing::HasSubstr("bashcompinit"));
  EXPECT_THAT(text, ::testing::HasSubstr("complete -o filenames -F _bridge_launch"));
  if (!have_shell("zsh")) GTEST_SKIP() << "zsh is not installed; the script was not run";
  EXPECT_EQ(run_command({"zsh", "-n", script}).exit_code, 0);
  // Loaded as the docs say in a shell whose ~/.zshrc never ran compinit (found by a new-user
  // trial: `compdef` was missing).
  auto plain =
      run_command({"zsh", "-f", "-c", "source " + script + " && complete -p bridge-launch"},
                  {{"HOME", testing::TempDir()}});
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_THAT(plain.out, ::testing::HasSubstr("-F _bridge_launch bridge-launch"));
  // bashcompinit's compgen -F runs the function as zsh completion does; zsh itself filters by
  // the prefix, so the list holds more than the match.
  auto complete = [&](const std::string& words, int cword) {
    return run_command({"zsh", "-f", "-c",
                        "autoload -U +X compinit && compinit -u -D; source " + script +
                            "; COMP_WORDS=(" + words + "); COMP_CWORD=" + std::to_string(cword) +
                            "; compgen -F _bridge_launch -- x"})
        .out;
  };
  EXPECT_THAT(complete("bridge-launch r.yaml model.ten", 2),
              ::testing::HasSubstr("model.tensor_model_parallel_size=\n"));
  EXPECT_THAT(complete("bridge-launch r.yaml model.precision=b", 2),
              ::testing::HasSubstr("model.precision=bf16\n"));
}

TEST(CliDocsTest, FishCompletionCompletesCommandsKeysAndValues) {
  std::string script = completion_file("fish");
  std::string text = test::read_file(script);
  for (const auto& c : kCommands)
    EXPECT_THAT(text, ::testing::HasSubstr(
                          "complete -c bridge-launch -n __fish_use_subcommand -a " + c + " "))
        << c;
  EXPECT_THAT(text, ::testing::HasSubstr("model.tensor_model_parallel_size= 'integer >= 1'"));
  EXPECT_THAT(text, ::testing::HasSubstr("case model.moe_token_dispatcher_type\n"
                                         "            printf '%s\\n' allgather alltoall flex\n"));
  EXPECT_THAT(text, ::testing::HasSubstr(
                        fmt::format("-l executor -x -a '{}'", fmt::join(executor_names(), " "))));
  EXPECT_EQ(text, run_command({BRIDGE_LAUNCH_BIN, "completion", "fish"}).out);  // deterministic
  if (!have_shell("fish")) GTEST_SKIP() << "fish is not installed; the script was not run";
  EXPECT_EQ(run_command({"fish", "--no-config", "-n", script}).exit_code, 0);
  // `complete -C LINE` prints what fish offers for LINE.
  auto complete = [&](const std::string& line) {
    return run_command(
               {"fish", "--no-config", "-c", "source " + script + "; complete -C '" + line + "'"})
        .out;
  };
  EXPECT_EQ(complete("bridge-launch r.yaml model.ten"),
            "model.tensor_model_parallel_size=\tinteger >= 1\n");
  EXPECT_EQ(complete("bridge-launch r.yaml model.moe_token_dispatcher_type="),
            "model.moe_token_dispatcher_type=allgather\nmodel.moe_token_dispatcher_type=alltoall\n"
            "model.moe_token_dispatcher_type=flex\n");
  EXPECT_EQ(complete("bridge-launch r.yaml cluster.gpu=gb"),
            "cluster.gpu=gb200\ncluster.gpu=gb300\n");
  EXPECT_THAT(complete("bridge-launch sch"), ::testing::HasSubstr("schema\t"));
  EXPECT_THAT(complete("bridge-launch --executor "), ::testing::HasSubstr("kubernetes"));
}

TEST(CliDocsTest, VersionNamesTheCommit) {
  auto r = run_command({BRIDGE_LAUNCH_BIN, "--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out,
              ::testing::MatchesRegex("bridge-launch [0-9.]+ \\(commit ([0-9a-f]+|unknown)\\)\n"));
}

}  // namespace
}  // namespace bridge
