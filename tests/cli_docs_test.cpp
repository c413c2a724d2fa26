// The man page and the completion scripts stay in sync with the CLI.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "test_util.h"

namespace bridge {
namespace {

using test::run_command;

const std::vector<std::string> kCommands{"validate", "plan", "plugins",   "list",    "status",
                                         "logs",     "why",  "cancel",    "compare", "ablate",
                                         "advise",   "init", "completion"};

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

TEST(CliDocsTest, BashCompletionIsValidAndCompletesSubcommands) {
  auto r = run_command({BRIDGE_LAUNCH_BIN, "completion", "bash"});
  ASSERT_EQ(r.exit_code, 0);
  std::string script = testing::TempDir() + "/bl-completion.bash";
  std::ofstream(script) << r.out;
  EXPECT_EQ(run_command({"/bin/bash", "-n", script}).exit_code, 0);
  auto complete = [&](const std::string& words, int cword) {
    return run_command({"/bin/bash", "-c",
                        "source " + script + "; COMP_WORDS=(" + words +
                            "); COMP_CWORD=" + std::to_string(cword) +
                            "; _bridge_launch; printf '%s\\n' \"${COMPREPLY[@]}\""})
        .out;
  };
  EXPECT_EQ(complete("bridge-launch sta", 1), "status\n");
  EXPECT_THAT(complete("bridge-launch va", 1), ::testing::HasSubstr("validate"));
  EXPECT_EQ(complete("bridge-launch --executor k", 2), "kubernetes\n");
  EXPECT_EQ(complete("bridge-launch completion z", 2), "zsh\n");
  EXPECT_THAT(complete("bridge-launch plan --for", 2), ::testing::HasSubstr("--format"));
}

TEST(CliDocsTest, ZshCompletionLoadsThroughBashcompinit) {
  auto r = run_command({BRIDGE_LAUNCH_BIN, "completion", "zsh"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, ::testing::HasSubstr("bashcompinit"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("complete -o filenames -F _bridge_launch"));
  EXPECT_EQ(run_command({BRIDGE_LAUNCH_BIN, "completion", "fish"}).exit_code, 2);
}

TEST(CliDocsTest, VersionNamesTheCommit) {
  auto r = run_command({BRIDGE_LAUNCH_BIN, "--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out,
              ::testing::MatchesRegex("bridge-launch [0-9.]+ \\(commit ([0-9a-f]+|unknown)\\)\n"));
}

}  // namespace
}  // namespace bridge
