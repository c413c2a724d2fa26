// The command line, exercised through the real bridge-launch binary: option
// parsing (-ng/-gn exactly as written), exit codes, where output goes, the JSON contract,
// and the bad-input list of the foundation issue (each: exit 2, the problem and its position).
#include "launcher/cli.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "jobs/registry.h"
#include "launcher/services.h"
#include "model/executor_kind.h"
#include "plugins/plugin.h"
#include "system/command_runner.h"
#include "tests/support/build_paths.h"
#include "tests/support/fake_services.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

using nlohmann::json;
using test::ChildResult;
using ::testing::ContainsRegex;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;
using ::testing::Not;

std::string fixture(const std::string& name) {
  return std::string(BRIDGE_TEST_DATA) + "/recipes/" + name;
}

class CliTest : public ::testing::Test {
 protected:
  // Runs bridge-launch with `args`, HOME pointing at a scratch directory so that nothing
  // the planner expands depends on the machine running the tests.
  ChildResult run(const std::vector<std::string>& args,
                  std::map<std::string, std::string> env = {}) {
    std::vector<std::string> argv{BRIDGE_LAUNCH_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    env.emplace("HOME", home_.path());
    return test::run_command(argv, env);
  }

  static json parse(const std::string& out) { return json::parse(out, nullptr, false); }

  // The bad-input contract: exit 2, nothing on stdout, the message on stderr, no crash.
  static void expect_rejected(const ChildResult& r, const std::vector<std::string>& fragments) {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.out, "") << "stdout must hold results only";
    for (const auto& f : fragments) EXPECT_THAT(r.err, HasSubstr(f));
    EXPECT_THAT(r.err, Not(HasSubstr("internal error")));
    EXPECT_THAT(r.err, Not(HasSubstr("terminate")));
    EXPECT_THAT(r.err, Not(HasSubstr("what()")));
  }

  test::TempDir home_;
};

// ---------------------------------------------------------------------------------------
// Option translation (in-process).

TEST(CliTranslateTest, TwoLetterOptionsBecomeLongForms) {
  EXPECT_THAT(translate_short_options({"plan", "-ng", "16", "-gn", "8", "r.yaml"}),
              ElementsAre("plan", "--num-gpus", "16", "--gpus-per-node", "8", "r.yaml"));
  EXPECT_THAT(translate_short_options({"-ng=16", "-gn=8"}),
              ElementsAre("--num-gpus=16", "--gpus-per-node=8"));
  // Other tokens are left alone, including look-alikes and everything after "--".
  EXPECT_THAT(translate_short_options({"-g", "h100", "-ngx", "x-ng", "-n", "--num-gpus", "4"}),
              ElementsAre("-g", "h100", "-ngx", "x-ng", "-n", "--num-gpus", "4"));
  EXPECT_THAT(translate_short_options({"r.yaml", "--", "-ng", "16"}),
              ElementsAre("r.yaml", "--", "-ng", "16"));
  EXPECT_THAT(translate_short_options({}), IsEmpty());
}

// The early scans skip an option's value by takes_value's names; those are the names the
// parser defines its valued options with, every one of them, and no flag.
TEST(CliTranslateTest, TakesValueKnowsEveryValuedPlanOption) {
  std::vector<std::string> names = plan_option_names_taking_a_value();
  EXPECT_THAT(names,
              ::testing::IsSupersetOf({"-e", "--executor", "--num-gpus", "--runtime-check"}));
  for (const std::string& name : names) EXPECT_TRUE(takes_value(name)) << name;
  for (const char* flag : {"--strict", "--dry-run", "--wait", "--help", "-v", "r.yaml"})
    EXPECT_FALSE(takes_value(flag)) << flag;
}

// The executor a launch names, read before the parser exists (run_cli starts its submission
// with it): only for a plain launch, in every spelling. (A repeated --executor is the
// parser's usage error; the pre-scan's guess is then dropped unused.)
TEST(CliEarlySubmissionTest, OnlyAPlainLaunchNamesItsExecutorEarly) {
  EXPECT_EQ(executor_of_a_plain_launch({"--executor", "slurm", "r.yaml"}), "slurm");
  EXPECT_EQ(executor_of_a_plain_launch({"-e", "slurm", "r.yaml", "a.b=1"}), "slurm");
  EXPECT_EQ(executor_of_a_plain_launch({"--executor=kubernetes", "r.yaml"}), "kubernetes");
  EXPECT_EQ(executor_of_a_plain_launch({"-ng", "16", "-gn", "8", "r.yaml", "--executor", "slurm"}),
            "slurm");
  EXPECT_EQ(executor_of_a_plain_launch({"-e", "local", "--executor", "slurm", "r.yaml"}), "slurm");
  // An option's value is not a subcommand (`-E plan=1`, `--format plan`).
  EXPECT_EQ(executor_of_a_plain_launch({"-E", "plan", "--executor", "slurm", "r.yaml"}), "slurm");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"r.yaml"},
        {"--executor", "slurm", "--dry-run", "r.yaml"},
        {"--executor", "slurm", "plan", "r.yaml"},
        {"--executor", "slurm", "ablate", "r.yaml", "--vary", "a=1,2"},
        {"status", "--executor", "slurm"},
        {"--executor", "slurm", "--help"},
        {"--executor", "slurm", "-h"},
        {"--version", "--executor", "slurm"},
        {"r.yaml", "--", "--executor", "slurm"},
        {"--executor"}})
    EXPECT_EQ(executor_of_a_plain_launch(args), "") << ::testing::PrintToString(args);
}

// Every subcommand the parser has (as --help lists them) stops the early start: the pre-scan's
// own list of names must not fall behind the parser's.
TEST(CliEarlySubmissionTest, EverySubcommandOfTheParserStopsTheEarlyStart) {
  ChildResult help = test::run_command({BRIDGE_LAUNCH_BIN, "--help"});
  ASSERT_EQ(help.exit_code, 0) << help.err;
  std::istringstream lines(help.out.substr(help.out.find("Subcommands:")));
  std::vector<std::string> names;
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line) && line.rfind("  ", 0) == 0 && line.size() > 2 && line[2] != ' ')
    names.push_back(line.substr(2, line.find(' ', 2) - 2));
  EXPECT_GE(names.size(), 10u) << help.out;
  for (const auto& name : names)
    EXPECT_EQ(executor_of_a_plain_launch({"--executor", "slurm", name, "r.yaml"}), "") << name;
}

// In process, with a recording runner: the early sbatch is started before parsing for a launch
// and for a command line the parser then refuses, never for a dry-run or a subcommand; only
// the launch gives it a script.
TEST(CliEarlySubmissionTest, TheEarlySbatchGetsAScriptOnlyFromALaunch) {
  test::TempDir tmp;
  std::filesystem::path dir = tmp.path();
  std::string recipe = (dir / "r.yaml").string();
  std::ofstream(recipe) << "name: early\ncluster: {num_gpus: 4, gpus_per_node: 2}\n"
                           "runtime:\n  command: [/bin/true]\n  pass_overrides: false\n"
                           "executor:\n  slurm: {account: acct, partition: batch, job_dir: "
                        << (dir / "jobs").string() << "}\n";
  testing::ScriptedRunner runner([](const CommandSpec& spec) {
    bridge::CommandResult r;
    if (spec.argv.at(0) == "sbatch") r.out = "4242\n";
    return r;
  });
  testing::TestServices seams(runner);
  Services services = seams.command_services((dir / "state").string());
  std::ostringstream out, err;
  // What the process would have ended with, and what was printed by then (the real
  // end_process exits; this one returns, and the command then returns as usual).
  std::vector<std::pair<int, std::string>> ended;
  services.end_process = [&](int code) { ended.emplace_back(code, out.str() + err.str()); };
  auto launch = [&](const std::vector<std::string>& args) {
    runner.started.clear();
    runner.calls.clear();
    ended.clear();
    out.str("");
    err.str("");
    int code = run_cli(args, out, err, services);
    return std::pair{code, err.str()};
  };
  auto sbatch_runs = [&]() {
    size_t n = 0;
    for (const auto& spec : runner.calls) n += spec.argv.at(0) == "sbatch";
    return n;
  };
  EXPECT_EQ(launch({"--executor", "slurm", "plan", recipe}).first, 0);
  EXPECT_THAT(runner.started, IsEmpty());
  EXPECT_THAT(ended, IsEmpty()) << "`plan` ends the usual way";
  // A dry-run ends the process once its script is printed, with nothing started.
  EXPECT_EQ(launch({"--executor", "slurm", "--dry-run", recipe}).first, 0);
  EXPECT_THAT(runner.started, IsEmpty());
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].first, 0);
  EXPECT_THAT(ended[0].second, HasSubstr("#SBATCH --comment=bridge-launch:early-"));
  // One that is refused ends the usual way (3 GPUs do not fill nodes of 2).
  EXPECT_EQ(launch({"--executor", "slurm", "--dry-run", recipe, "cluster.num_gpus=3"}).first, 2);
  EXPECT_THAT(ended, IsEmpty()) << "a refused dry-run ends the usual way";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--executor", "slurm", "--no-such-option", recipe},
        {"--executor", "slurm", recipe, "cluster.num_gpus=-3"}}) {
    EXPECT_EQ(launch(args).first, 2) << ::testing::PrintToString(args);
    ASSERT_EQ(runner.started.size(), 1u) << "started before parsing";
    EXPECT_EQ(runner.started[0].argv.at(0), "sbatch");
    EXPECT_EQ(sbatch_runs(), 0u) << "a refused command line submitted";
    EXPECT_THAT(ended, IsEmpty()) << "a refused command line ends the usual way";
  }
  auto [code, said] = launch({"--executor", "slurm", recipe});
  EXPECT_EQ(code, 0) << said;
  EXPECT_EQ(runner.started.size(), 1u);
  ASSERT_EQ(sbatch_runs(), 1u);
  EXPECT_THAT(runner.calls[0].stdin_text, HasSubstr("#SBATCH --comment=bridge-launch:early-"));
  // The launch ends the process once the job is submitted and everything is printed.
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].first, 0);
  EXPECT_THAT(ended[0].second, HasSubstr("(slurm id 4242)"));
  EXPECT_EQ(ended[0].second, out.str() + err.str()) << "printed after the process ended";
  // An ablate submits several jobs: none of them ends the process.
  auto [ablated, ablate_said] =
      launch({"--executor", "slurm", "ablate", recipe, "--vary", "cluster.num_gpus=2,6"});
  EXPECT_EQ(ablated, 0) << ablate_said;
  EXPECT_EQ(sbatch_runs(), 3u) << ablate_said;  // the baseline and two variants
  EXPECT_THAT(ended, IsEmpty());
}

// Issue 47 item 13: `cancel` of a Slurm job that is on its second attempt stops that attempt
// and names its Slurm id; it named the first attempt's id, which the registry recorded.
TEST(CliCancelTest, CancelDuringASlurmRetryNamesTheAttemptItStops) {
  test::TempDir tmp;
  const std::string state = tmp.path() + "/state";
  const std::string job_dir = tmp.path() + "/job";
  std::filesystem::create_directories(job_dir);
  std::ofstream(job_dir + "/attempts")
      << "start attempt=1 of=3 slurm_job=134 nodes=node1 at=2026-01-01T00:00:00Z\n"
         "retry attempt=1 at=2026-01-01T00:10:00Z rc=1 signature=nccl-timeout class=network "
         "host=node1 unit=rank_3 excluded=node1 next_slurm_job=135\n";
  testing::ScriptedRunner runner([](const CommandSpec&) { return bridge::CommandResult(); });
  testing::TestServices seams(runner);
  JobRecord rec;
  rec.id = "job-retry-20260101-000000-0001";
  rec.name = "retry";
  rec.executor = "slurm";
  rec.scheduler_id = "134";
  rec.job_dir = job_dir;
  rec.state = JobState::kPending;
  rec.submitted_at = "2026-01-01T00:00:00Z";
  Diagnostics diags;
  ASSERT_TRUE(JobRegistry(state, seams.registry_seams()).put(rec, diags, /*create=*/true));
  Services services = seams.command_services(state);
  std::ostringstream out, err;
  EXPECT_EQ(run_cli({"cancel", rec.id}, out, err, services), 0) << err.str();
  ASSERT_EQ(runner.calls.size(), 1u);
  EXPECT_EQ(runner.calls[0].argv, (std::vector<std::string>{"scancel", "135"}));
  EXPECT_THAT(out.str(), HasSubstr("(slurm id 135)"));
  EXPECT_THAT(out.str(), Not(HasSubstr("134")));
}

// The tables Services holds are the ones the commands use: a launch makes its executor from
// Services::executors and plans with Services::plugins, never with the tables the process
// defines (executor_registry(), plugin_registry()), which only the composition root reads.
int g_made_by_test_table = 0;
std::unique_ptr<Executor> make_counted_slurm(const ExecutorServices& services) {
  ++g_made_by_test_table;
  return find_executor(executor_registry(), "slurm")->make(services);
}

class TablePlugin : public LaunchPlugin {
 public:
  void contribute(const PluginContext&, const YamlNode&, const SourceLoc&, PluginContribution& out,
                  Diagnostics&) const override {
    out.env.push_back(EnvVar{"FROM_THE_TEST_TABLE", "1", "", "test"});
  }
};

TEST(CliServicesTest, CommandsUseTheExecutorAndPluginTablesOfTheirServices) {
  test::TempDir tmp;
  std::string recipe = tmp.path() + "/r.yaml";
  std::ofstream(recipe) << "name: tables\ncluster: {num_gpus: 4, gpus_per_node: 2}\n"
                           "runtime:\n  command: [/bin/true]\n  pass_overrides: false\n"
                           "plugins:\n  table_plugin: {}\n"
                           "executor:\n  slurm: {account: acct, partition: batch, job_dir: "
                        << tmp.path() << "/jobs}\n";
  const std::vector<ExecutorInfo> executors{
      {"slurm", "the real Slurm executor, counted", make_counted_slurm}};
  const std::vector<PluginInfo> plugins{{"table_plugin", "sets FROM_THE_TEST_TABLE=1", [] {
                                           return std::unique_ptr<LaunchPlugin>(new TablePlugin());
                                         }}};
  const std::vector<ExecutorInfo> no_executors;
  testing::TestServices seams;
  auto run_with = [&](const std::vector<ExecutorInfo>& table,
                      const std::vector<std::string>& args) {
    Services services{seams.env,    seams.services().runner,
                      seams.clock,  seams.sleeper,
                      seams.random, seams.log.logger,
                      "",           table,
                      plugins,      JobRegistry(tmp.path() + "/state", seams.registry_seams()),
                      nullptr};
    std::ostringstream out, err;
    int code = run_cli(args, out, err, services);
    return std::tuple{code, out.str(), err.str()};
  };
  g_made_by_test_table = 0;
  auto [code, out, err] = run_with(executors, {"--executor", "slurm", "--dry-run", recipe});
  EXPECT_EQ(code, 0) << err;
  EXPECT_GE(g_made_by_test_table, 1) << "the executor was not made from Services::executors";
  EXPECT_THAT(out, HasSubstr("FROM_THE_TEST_TABLE")) << "the plan did not use Services::plugins";
  // The process's own plugin table has no `table_plugin`; the Services' table has no `wandb`.
  auto [plugins_code, plugins_out, plugins_err] = run_with(executors, {"plugins"});
  EXPECT_EQ(plugins_code, 0) << plugins_err;
  EXPECT_THAT(plugins_out, HasSubstr("table_plugin"));
  EXPECT_THAT(plugins_out, Not(HasSubstr("wandb")));
  // Without a Slurm row, Slurm is not available, whatever the process defines.
  auto [none_code, none_out, none_err] =
      run_with(no_executors, {"--executor", "slurm", "--dry-run", recipe});
  EXPECT_EQ(none_code, 2) << none_out;
  EXPECT_THAT(none_err, HasSubstr("the slurm executor is not available"));
}

// ---------------------------------------------------------------------------------------
// Help and version.

TEST_F(CliTest, HelpShowsTwoLetterOptions) {
  ChildResult r = run({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("-ng, --num-gpus"));
  EXPECT_THAT(r.out, HasSubstr("-gn, --gpus-per-node"));
  EXPECT_THAT(r.out, HasSubstr("validate"));
  EXPECT_THAT(r.out, HasSubstr("plan"));
  EXPECT_THAT(r.out, HasSubstr("Exit codes"));

  ChildResult plan = run({"plan", "--help"});
  EXPECT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_THAT(plan.out, HasSubstr("-ng, --num-gpus"));
  EXPECT_THAT(plan.out, HasSubstr("--format"));
}

// The exit codes `--help` states are the ones the process ends with: ok, a usage error, a
// runtime failure (`compare` of a log with no step time has nothing to compare).
TEST_F(CliTest, ExitCodesAreTheOnesTheHelpStates) {
  ChildResult help = run({"--help"});
  ASSERT_EQ(help.exit_code, 0) << help.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(help.out, m,
                                std::regex("Exit codes: (\\d+) ok, (\\d+) runtime failure, (\\d+) "
                                           "usage error or invalid recipe, (\\d+) interrupted")))
      << help.out;
  EXPECT_EQ(run({"--version"}).exit_code, std::stoi(m[1]));
  std::string empty_log = home_.path() + "/empty.log";
  std::ofstream(empty_log) << "no iteration lines here\n";
  ChildResult nothing = run({"compare", empty_log});
  EXPECT_EQ(nothing.exit_code, std::stoi(m[2])) << nothing.err;
  EXPECT_THAT(nothing.out, HasSubstr("nothing to compare"));
  ChildResult usage = run({"--no-such-option"});
  EXPECT_EQ(usage.exit_code, std::stoi(m[3])) << usage.err;
  EXPECT_THAT(usage.err, HasSubstr("bridge-launch: error: "));
  EXPECT_EQ(std::stoi(m[4]), 128 + SIGINT) << "what a shell reports for Ctrl-C";
}

TEST_F(CliTest, VersionPrintsVersionAndCommit) {
  ChildResult r = run({"--version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // The version and commit come from CMake (project version, `git rev-parse`); the test
  // checks the shape so that it does not have to be rebuilt for each commit.
  EXPECT_THAT(r.out, MatchesRegex("bridge-launch [0-9]+\\.[0-9]+\\.[0-9]+ \\(commit "
                                  "([0-9a-f]{12}|unknown)\\)\n"));
}

// Two --dry-runs of the same inputs print the same bytes (Kubernetes: tests/k8s_cli_test.cpp).
TEST_F(CliTest, DryRunIsByteIdenticalAcrossRunsForLocalAndSlurm) {
  for (const char* executor : {"local", "slurm"}) {
    std::vector<std::string> args{"--dry-run", "--executor", executor,
                                  std::string(BRIDGE_SOURCE_DIR) + "/examples/recipes/demo.yaml"};
    ChildResult first = run(args);
    ChildResult second = run(args);
    ASSERT_EQ(first.exit_code, 0) << executor << ": " << first.err;
    EXPECT_FALSE(first.out.empty());
    EXPECT_EQ(first.out, second.out) << executor;
  }
}

// ---------------------------------------------------------------------------------------
// -ng / -gn exactly as written.

TEST_F(CliTest, TwoLetterOptionsParseAsWritten) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           // Two nodes: the Slurm executor (the local one refuses more than one node).
           {"plan", "-e", "slurm", "--format", "json", "-ng", "16", "-gn", "8",
            fixture("moe.yaml")},
           {"plan", "-e", "slurm", "--format", "json", "-ng=16", "-gn=8", fixture("moe.yaml")},
           {"plan", "-e", "slurm", "--format=json", "--num-gpus", "16", "--gpus-per-node=8",
            fixture("moe.yaml")},
           {"plan", "-e", "slurm", fixture("moe.yaml"), "-ng", "16", "--format", "json", "-gn",
            "8"}}) {
    ChildResult r = run(args);
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    json j = parse(r.out);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    EXPECT_EQ(j["ok"], true);
    const json& t = j["topology"];
    EXPECT_EQ(t["num_gpus"], 16);
    EXPECT_EQ(t["gpus_per_node"], 8);
    EXPECT_EQ(t["nodes"], 2);
    EXPECT_EQ(t["tp"], 2);
    EXPECT_EQ(t["pp"], 1);
    EXPECT_TRUE(t["vpp"].is_null());
    EXPECT_EQ(t["cp"], 1);
    EXPECT_EQ(t["ep"], 4);
    EXPECT_EQ(t["etp"], 2);  // defaults to tp
    EXPECT_EQ(t["dp"], 8);   // 16 / (2*1*1)
  }
}

TEST_F(CliTest, OptionsOverrideTheRecipe) {
  ChildResult r = run({"plan", "--format", "json", "-ng", "32", "-gn", "4", "-g", "B200",
                       fixture("full.yaml"), "model.expert_model_parallel_size=8"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  json j = parse(r.out);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["topology"]["num_gpus"], 32);
  EXPECT_EQ(j["topology"]["gpus_per_node"], 4);
  EXPECT_EQ(j["topology"]["nodes"], 8);
  EXPECT_EQ(j["topology"]["ep"], 8);
  EXPECT_EQ(j["topology"]["dp"], 32);
  EXPECT_EQ(j["topology"]["gpu"], "b200");
}

// Executor settings from plugins carry their source and a one-line reason, like env.
TEST_F(CliTest, PlanShowsWhoChangedTheExecutorAndWhy) {
  ChildResult r = run({"plan", "--format", "json", "--executor", "slurm", fixture("full.yaml")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = parse(r.out);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["executor"]["preempt_signal_seconds"], 60);
  const json& change = j["executor"]["changes"]["preempt_signal_seconds"];
  EXPECT_EQ(change["source"], "plugin:preemption");
  EXPECT_THAT(change["reason"].get<std::string>(), HasSubstr("checkpoint"));
  ChildResult text = run({"plan", "--executor", "slurm", fixture("full.yaml")});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("executor changes"));
  EXPECT_THAT(text.out, HasSubstr("plugin:preemption"));
  EXPECT_THAT(text.out, ContainsRegex("so\\s+the runtime can checkpoint"));
}

// A new user saw `plan` and `validate` print the same info line twice (issue 47). No example,
// on any executor, prints one diagnostic line twice on either command (stdout and stderr).
TEST_F(CliTest, NoDiagnosticLineIsPrintedTwice) {
  size_t runs = 0;
  for (const char* dir : {"examples/recipes", "examples/named"})
    for (const auto& entry :
         std::filesystem::directory_iterator(std::string(test::kSourceDir) + "/" + dir)) {
      if (entry.path().extension() != ".yaml") continue;
      for (const char* command : {"plan", "validate"})
        for (const std::string& executor : executor_names()) {
          ChildResult r = run({command, "--executor", executor, entry.path().string()});
          ++runs;
          std::map<std::string, int> seen;
          std::istringstream lines(r.out + r.err);
          for (std::string line; std::getline(lines, line);) {
            if (line.find("info: ") == std::string::npos &&
                line.find("warning: ") == std::string::npos)
              continue;
            EXPECT_EQ(++seen[line], 1)
                << command << " --executor " << executor << " " << entry.path() << ":\n"
                << line;
          }
        }
    }
  EXPECT_GE(runs, 36u);
}

// Issue 46: `plan` is read on a terminal. Every line of every example's plan fits 120 columns,
// even with a 3,000-byte Hydra override (cut, with its length), and the command line wraps as
// one shell command.
TEST_F(CliTest, EveryExamplesPlanFitsOneHundredTwentyColumns) {
  size_t plans = 0;
  for (const char* dir : {"examples/recipes", "examples/named"})
    for (const auto& entry :
         std::filesystem::directory_iterator(std::string(test::kSourceDir) + "/" + dir)) {
      if (entry.path().extension() != ".yaml") continue;
      ChildResult r = run({"plan", "--executor", "slurm", entry.path().string()});
      if (r.exit_code != 0) continue;  // a recipe for another executor
      ++plans;
      std::istringstream lines(r.out);
      for (std::string line; std::getline(lines, line);)
        EXPECT_LE(line.size(), 120u) << entry.path() << ":\n" << line;
    }
  EXPECT_GE(plans, 6u);
  ChildResult wide =
      run({"plan", "--executor", "slurm",
           std::string(test::kSourceDir) + "/examples/recipes/gpt-175b-tp-pp-dp.yaml"});
  ASSERT_EQ(wide.exit_code, 0) << wide.err;
  EXPECT_THAT(
      wide.out,
      ContainsRegex(
          "\\+\\+comm_overlap\\.tp_comm_overlap_cfg=\\{_target_:[^\n]*\\.\\.\\. \\([0-9]+ bytes in "
          "all\\)"));
  EXPECT_THAT(wide.out, HasSubstr("`plan --format json` has the whole argv"));
  EXPECT_THAT(wide.out, ContainsRegex("run_recipe.py [^\n]* \\\\\n      --dataset"));
}

// --template only replaces the sbatch script; with another executor it would be silently
// ignored, so it is refused before anything is rendered or started.
TEST_F(CliTest, TemplateWithAnExecutorThatHasNoneIsRefused) {
  std::string tmpl = home_.write("my.mustache", "#!/bin/bash\necho {{job_name}}\n");
  std::string state = home_.path() + "/state";
  for (const char* executor : {"local", "kubernetes"}) {
    ChildResult r = run({"--executor", executor, "--template", tmpl, fixture("full.yaml"),
                         "runtime.container_image=nvcr.io/nvidia/nemo:25.11", "cluster.num_gpus=8",
                         "cluster.gpus_per_node=8"},
                        {{"BRIDGE_LAUNCH_STATE_DIR", state}});
    expect_rejected(r, {"template-not-used", std::string("the ") + executor + " executor",
                        "use --executor slurm"});
    EXPECT_FALSE(std::filesystem::exists(state)) << executor;
  }
  ChildResult slurm =
      run({"--dry-run", "--executor", "slurm", "--template", tmpl, fixture("full.yaml")});
  EXPECT_EQ(slurm.exit_code, 0) << slurm.err;
  EXPECT_THAT(slurm.out, HasSubstr("#!/bin/bash\necho "));
}

// Issue 47 item 13: `--runtime-check ""` silently ran no check. An empty Python is an error
// wherever it is given (the option, the recipe key, an override), before anything runs.
TEST_F(CliTest, AnEmptyRuntimeCheckIsAnErrorNotASilentNoCheck) {
  std::string state = home_.path() + "/state";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"validate", fixture("full.yaml"), "--runtime-check", ""},
        {"plan", fixture("full.yaml"), "--runtime-check", ""},
        {"--dry-run", "--runtime-check", "", fixture("full.yaml")},
        {"validate", fixture("full.yaml"), "runtime.check.python=\"\""}}) {
    ChildResult r = run(args, {{"BRIDGE_LAUNCH_STATE_DIR", state}});
    expect_rejected(r, {"runtime.check.python", "is empty", "help:"});
    EXPECT_FALSE(std::filesystem::exists(state));
  }
}

// ---------------------------------------------------------------------------------------
// The JSON contract.

TEST_F(CliTest, PlanJsonForAValidRecipe) {
  ChildResult r = run({"plan", "--format", "json", fixture("full.yaml")});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  json j = parse(r.out);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["ok"], true);
  ASSERT_TRUE(j["diagnostics"].is_array());
  for (const auto& d : j["diagnostics"]) EXPECT_NE(d["severity"], "error") << d.dump();
  EXPECT_EQ(j["topology"]["nodes"], 2);
  EXPECT_EQ(j["topology"]["dp"], 16);
  EXPECT_EQ(j["topology"]["ep"], 16);
  EXPECT_EQ(j["topology"]["etp"], 1);
  ASSERT_TRUE(j["comm_overlap"].is_object());
  EXPECT_EQ(j["comm_overlap"].size(), 14u);
  EXPECT_EQ(j["comm_overlap"]["overlap_moe_expert_parallel_comm"]["source"], "user");
}

TEST_F(CliTest, PlanJsonForAnInvalidRecipe) {
  ChildResult r = run({"plan", "--format", "json", fixture("wrong_type.yaml")});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  json j = parse(r.out);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["ok"], false);
  ASSERT_TRUE(j["diagnostics"].is_array());
  ASSERT_EQ(j["diagnostics"].size(), 1u) << r.out;
  const json& d = j["diagnostics"][0];
  EXPECT_EQ(d["severity"], "error");
  EXPECT_EQ(d["code"], "wrong-type");
  EXPECT_EQ(d["path"], "model.num_layers");
  EXPECT_EQ(d["line"], 3);
  EXPECT_EQ(d["column"], 15);
  EXPECT_THAT(d["message"].get<std::string>(), HasSubstr("expects an integer"));
}

TEST_F(CliTest, PlanJsonOverrideDiagnosticsHaveNoPosition) {
  ChildResult r = run({"plan", "--format", "json", fixture("minimal.yaml"), "model.tp=4"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  json j = parse(r.out);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["ok"], false);
  ASSERT_EQ(j["diagnostics"].size(), 1u) << r.out;
  EXPECT_EQ(j["diagnostics"][0]["code"], "unknown-key");
  EXPECT_TRUE(j["diagnostics"][0]["line"].is_null());
  EXPECT_TRUE(j["diagnostics"][0]["column"].is_null());
}

TEST_F(CliTest, PlanJsonForAMissingFileIsStillJson) {
  ChildResult r = run({"plan", "--format", "json", fixture("nope.yaml")});
  EXPECT_EQ(r.exit_code, 2);
  json j = parse(r.out);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["ok"], false);
  EXPECT_FALSE(j["diagnostics"].empty());
}

TEST_F(CliTest, ValidateJson) {
  ChildResult ok = run({"validate", "--format", "json", fixture("sp_warning.yaml")});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  json j = parse(ok.out);
  ASSERT_FALSE(j.is_discarded()) << ok.out;
  EXPECT_EQ(j["ok"], true);
  ASSERT_EQ(j["diagnostics"].size(), 1u);
  EXPECT_EQ(j["diagnostics"][0]["severity"], "warning");
  EXPECT_EQ(j["diagnostics"][0]["code"], "sequence-parallel-without-tp");
  EXPECT_EQ(j["diagnostics"][0]["line"], 8);

  ChildResult bad = run({"validate", "--format", "json", fixture("multiple_errors.yaml")});
  EXPECT_EQ(bad.exit_code, 2);
  json b = parse(bad.out);
  ASSERT_FALSE(b.is_discarded()) << bad.out;
  EXPECT_EQ(b["ok"], false);
  EXPECT_EQ(b["diagnostics"].size(), 3u);
}

// ---------------------------------------------------------------------------------------
// Text mode: results on stdout, diagnostics on stderr.

TEST_F(CliTest, TextModeKeepsDiagnosticsOffStdout) {
  ChildResult v = run({"validate", fixture("sp_warning.yaml")});
  EXPECT_EQ(v.exit_code, 0) << v.err;
  EXPECT_THAT(v.out, HasSubstr("ok (1 warning)"));
  EXPECT_THAT(v.out, Not(HasSubstr("warning:")));
  EXPECT_THAT(v.err, HasSubstr("sp_warning.yaml:8:22: warning: "));
  EXPECT_THAT(v.err, HasSubstr("[sequence-parallel-without-tp]"));

  ChildResult p = run({"plan", fixture("sp_warning.yaml")});
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_FALSE(p.out.empty());
  EXPECT_THAT(p.out, Not(HasSubstr("warning:")));
  EXPECT_THAT(p.out, Not(HasSubstr("sequence-parallel-without-tp")));
  EXPECT_THAT(p.err, HasSubstr("sequence-parallel-without-tp"));
}

TEST_F(CliTest, ValidateCleanRecipe) {
  ChildResult r = run({"validate", fixture("minimal.yaml")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, fixture("minimal.yaml") + ": ok (0 warnings)\n");
  EXPECT_THAT(r.err, Not(HasSubstr("error")));
}

// ---------------------------------------------------------------------------------------
// Bad input: exit 2, the problem and its position, no crash.

TEST_F(CliTest, MissingFile) {
  std::string path = fixture("does-not-exist.yaml");
  expect_rejected(run({"validate", path}), {path, "cannot read recipe", "[file-not-found]"});
}

TEST_F(CliTest, EmptyFile) {
  expect_rejected(run({"validate", fixture("empty.yaml")}),
                  {"empty.yaml:1:1: error: ", "empty", "[empty-recipe]"});
}

TEST_F(CliTest, NonYamlBytes) {
  test::TempDir dir;
  std::string png = dir.write("image.yaml", std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16));
  expect_rejected(run({"validate", png}), {png + ":1:1: error: ", "NUL"});
  std::string binary = dir.write("binary.yaml", "\xff\xfe\xfd\xfc\n");
  ChildResult r = run({"validate", binary});
  expect_rejected(r, {binary + ":1:1: error: "});
}

TEST_F(CliTest, TopLevelList) {
  expect_rejected(run({"validate", fixture("top_level_list.yaml")}),
                  {"top_level_list.yaml:1:1: error: ", "must be a mapping", "got a list"});
  // Also with -ng, which becomes an override of the (missing) cluster section.
  expect_rejected(run({"validate", "-ng", "16", fixture("top_level_list.yaml")}),
                  {"must be a mapping"});
}

TEST_F(CliTest, MisspelledKeySuggests) {
  expect_rejected(run({"validate", fixture("misspelled_key.yaml")}),
                  {"misspelled_key.yaml:3:3: error: ", "unknown key `tensor_model_paralel_size`",
                   "did you mean `tensor_model_parallel_size`?"});
}

TEST_F(CliTest, WrongType) {
  expect_rejected(run({"validate", fixture("wrong_type.yaml")}),
                  {"wrong_type.yaml:3:15: error: ", "`model.num_layers` expects an integer",
                   "`many`", "  num_layers: many"});
}

TEST_F(CliTest, MultipleErrorsAllReported) {
  ChildResult r = run({"validate", fixture("multiple_errors.yaml")});
  expect_rejected(r, {"multiple_errors.yaml:4:15: error: ", "multiple_errors.yaml:5:3: error: ",
                      "multiple_errors.yaml:7:14: error: ", "3 errors"});
}

// All errors in one pass, in file order: the plugin name (checked by the plan layer) and
// the schema errors (found by the loader) together, sorted by line.
TEST_F(CliTest, PluginTyposAndSchemaErrorsComeTogetherInFileOrder) {
  std::string path = home_.path() + "/typos.yaml";
  std::ofstream(path) << "name: t\n"
                         "cluster: {gpu: h100, num_gpus: 8, gpus_per_node: 8}\n"
                         "model:\n"
                         "  num_layers: x\n"
                         "plugins:\n"
                         "  perf_envv: {}\n"
                         "train: {max_stepz: 3}\n";
  ChildResult r = run({"validate", path});
  expect_rejected(r, {"typos.yaml:4:15: error: ",
                      "typos.yaml:6:3: error: unknown plugin `perf_envv` "
                      "(did you mean `perf_env`?)",
                      "typos.yaml:7:", "3 errors"});
  EXPECT_LT(r.err.find("typos.yaml:4:"), r.err.find("typos.yaml:6:"));
  EXPECT_LT(r.err.find("typos.yaml:6:"), r.err.find("typos.yaml:7:"));
}

TEST_F(CliTest, BadOverrideUnknownKey) {
  expect_rejected(
      run({"validate", fixture("minimal.yaml"), "model.tp=4"}),
      {"override 'model.tp=4'", "unknown key `tp`", "did you mean `tensor_model_parallel_size`?"});
}

TEST_F(CliTest, BadOverrideEmptyValue) {
  expect_rejected(run({"validate", fixture("minimal.yaml"), "model.num_layers="}),
                  {"override 'model.num_layers='", "empty value for `model.num_layers`"});
}

TEST_F(CliTest, BadOverrideMalformed) {
  expect_rejected(run({"validate", fixture("minimal.yaml"), "a..b=1"}),
                  {"override 'a..b=1'", "malformed key"});
  expect_rejected(run({"validate", fixture("minimal.yaml"), "=3"}), {"override '=3'", "KEY=VALUE"});
}

TEST_F(CliTest, GpusNotAMultipleOfGpusPerNode) {
  expect_rejected(run({"validate", "-ng", "12", "-gn", "8", fixture("moe.yaml")}),
                  {"override 'cluster.num_gpus=12'",
                   "num_gpus (12) is not a multiple of gpus_per_node (8)", "-ng 16"});
  expect_rejected(run({"plan", "-ng=12", "-gn=8", fixture("minimal.yaml")}),
                  {"not a multiple of gpus_per_node"});
}

TEST_F(CliTest, ModelParallelismNotDividingGpus) {
  expect_rejected(run({"validate", fixture("tp_not_dividing.yaml")}),
                  {"tp_not_dividing.yaml:4:13: error: ", "not divisible by tp*pp*cp = 3*1*1 = 3"});
  expect_rejected(run({"validate", "-ng", "8", "-gn", "8", fixture("minimal.yaml"),
                       "model.tensor_model_parallel_size=3"}),
                  {"tp*pp*cp"});
}

TEST_F(CliTest, LaunchFormRejectsInvalidRecipesBeforeSubmitting) {
  expect_rejected(run({fixture("wrong_type.yaml")}),
                  {"wrong_type.yaml:3:15: error: ", "nothing was submitted"});
  expect_rejected(run({"--dry-run", "-ng", "12", "-gn", "8", fixture("moe.yaml")}),
                  {"not a multiple of gpus_per_node"});
}

// Huge parallel sizes must be an error, not an integer overflow (tp=2^32 and pp=2^32 would
// wrap tp*pp*cp to 0 and divide by zero).
TEST_F(CliTest, HugeParallelSizesDoNotCrash) {
  ChildResult r = run({"validate", "-ng", "8", fixture("minimal.yaml"),
                       "model.tensor_model_parallel_size=4294967296",
                       "model.pipeline_model_parallel_size=4294967296"});
  expect_rejected(r, {"tp*pp*cp", "4294967296"});
}

// ---------------------------------------------------------------------------------------
// Usage errors.

TEST_F(CliTest, UsageErrorsExitTwo) {
  ChildResult unknown = run({"--bogus", fixture("minimal.yaml")});
  expect_rejected(unknown, {"--bogus", "--help"});
  expect_rejected(run({"plan", "--no-such-flag", fixture("minimal.yaml")}), {"--no-such-flag"});
  expect_rejected(run({"plan", "--format", "xml", fixture("minimal.yaml")}), {"xml"});
  expect_rejected(run({"validate"}), {"recipe"});
  expect_rejected(run({}), {"no recipe given"});
}

// ---------------------------------------------------------------------------------------
// Other subcommands.

TEST_F(CliTest, PluginsListsTheRegistry) {
  ChildResult r = run({"plugins"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("perf_env"));
  EXPECT_THAT(r.out, HasSubstr("preemption"));
  ChildResult as_json = run({"plugins", "--format", "json"});
  EXPECT_EQ(as_json.exit_code, 0) << as_json.err;
  auto list = nlohmann::json::parse(as_json.out);
  ASSERT_TRUE(list.is_array());
  bool perf_env = false;
  for (const auto& p : list) perf_env = perf_env || p.at("name") == "perf_env";
  EXPECT_TRUE(perf_env) << as_json.out;
}

TEST_F(CliTest, EmptyListSaysSoAndHelpTypesGpuCountsAsNumbers) {
  ChildResult list = run({"list"}, {{"BRIDGE_LAUNCH_STATE_DIR", home_.path() + "/empty-state"}});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_THAT(list.out, HasSubstr("no jobs in the registry yet"));
  ChildResult help = run({"--help"});
  EXPECT_THAT(help.out, HasSubstr("-ng, --num-gpus N"));
  EXPECT_THAT(help.out, HasSubstr("-gn, --gpus-per-node N"));
}

// A scheduler's message in a job's detail (a Kubernetes condition spans lines) is shown on
// one line in `list` and `status JOB`, escaped: a table row stays a row, and an escape in it
// is not sent to the terminal.
TEST_F(CliTest, ListShowsAMultiLineDetailOnOneEscapedLine) {
  std::string state = home_.path() + "/state";
  JobRecord rec;
  rec.id = "job-multi-20260101-000000-0001";
  rec.name = "multi";
  rec.executor = "kubernetes";
  rec.scheduler_id = "jobset/multi";
  rec.state = JobState::kFailed;
  rec.state_detail = "BackoffLimitExceeded: pod failed\nsecond line\x1b[2J";
  rec.submitted_at = "2026-01-01T00:00:00Z";
  Diagnostics diags;
  testing::TestServices seams;
  ASSERT_TRUE(JobRegistry(state, seams.registry_seams()).put(rec, diags, /*create=*/true))
      << diags.items().size();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"list"}, {"status", rec.id}}) {
    ChildResult r = run(args, {{"BRIDGE_LAUNCH_STATE_DIR", state}});
    EXPECT_THAT(r.out, HasSubstr("pod failed\\x0asecond line\\x1b[2J")) << r.out << r.err;
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("\nsecond line"), std::string::npos) << r.out;
  }
}

// Issue 47 item 8: a plan_confirmation.json in the job dir of a job that never started its
// ranks through the confirmation is not the job's verdict and is not shown; a job that did
// gets its verdict escaped and bounded.
TEST_F(CliTest, AVerdictIsShownOnlyForAJobThatConfirmedItsPlanAndEscaped) {
  std::string state = home_.path() + "/state";
  test::TempDir job_dir;
  job_dir.write("plan_confirmation.json",
                R"({"confirmed": false, "rank": 99999999999, "compared": 1,
                    "versions": {"megatron.bridge\u001b[2J": "0.6.2"},
                    "differences": [{"field": "f\u001b[31m", "key": "k", "planned": 1,
                                     "actual": 2}]})");
  testing::TestServices seams;
  JobRegistry registry(state, seams.registry_seams());
  for (bool confirms : {false, true}) {
    JobRecord rec;
    rec.id = confirms ? "job-v-20260101-000000-0002" : "job-v-20260101-000000-0001";
    rec.name = "v";
    rec.executor = "local";
    rec.scheduler_id = "1";
    rec.job_dir = job_dir.path();
    rec.state = JobState::kFailed;
    rec.submitted_at = "2026-01-01T00:00:00Z";
    rec.plan_json = {{"confirm_at_start", confirms}};
    Diagnostics diags;
    ASSERT_TRUE(registry.put(rec, diags, /*create=*/true)) << diags.items().size();
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"status", rec.id}, {"why", rec.id}}) {
      ChildResult r = run(args, {{"BRIDGE_LAUNCH_STATE_DIR", state}});
      EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
      EXPECT_THAT(r.out, Not(HasSubstr("1215752191"))) << r.out;
      if (confirms)
        EXPECT_THAT(r.out, HasSubstr("plan differs on a rank that is not known: f\\x1b[31m is 2"))
            << args[0] << "\n"
            << r.out << r.err;
      else
        EXPECT_THAT(r.out, Not(HasSubstr("plan differs"))) << args[0] << "\n" << r.out;
    }
  }
}

TEST_F(CliTest, ExamplesValidate) {
  const std::filesystem::path dir =
      std::filesystem::path(BRIDGE_TEST_DATA) / ".." / ".." / "examples" / "recipes";
  std::vector<std::string> examples;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".yaml") examples.push_back(e.path().string());
  if (examples.empty()) GTEST_SKIP() << "no examples in " << dir.string() << " yet";
  for (const auto& path : examples) {
    ChildResult r = run({"validate", path});
    EXPECT_EQ(r.exit_code, 0) << path << "\n" << r.err;
    EXPECT_THAT(r.out, HasSubstr(": ok ("));
  }
}

// ---------------------------------------------------------------------------------------
// Options written before a subcommand apply to it, or are refused: never silently dropped
// (a dry-run that launches is the worst bug a launcher can have).

TEST(CliOrderTest, OptionsBeforeASubcommandMoveBehindIt) {
  std::vector<std::string> subs{"validate", "plan", "ablate"};
  EXPECT_THAT(move_options_behind_subcommand({"--dry-run", "ablate", "r.yaml"}, subs),
              ElementsAre("ablate", "--dry-run", "r.yaml"));
  EXPECT_THAT(move_options_behind_subcommand({"-e", "slurm", "ablate", "r.yaml"}, subs),
              ElementsAre("ablate", "-e", "slurm", "r.yaml"));
  // An option's value that happens to be a subcommand name is not the subcommand.
  EXPECT_THAT(move_options_behind_subcommand({"--template", "plan", "r.yaml"}, subs),
              ElementsAre("--template", "plan", "r.yaml"));
  EXPECT_THAT(move_options_behind_subcommand({"r.yaml", "plan"}, subs),
              ElementsAre("r.yaml", "plan"));
  EXPECT_THAT(move_options_behind_subcommand({"validate", "--strict", "r.yaml"}, subs),
              ElementsAre("validate", "--strict", "r.yaml"));
}

TEST_F(CliTest, DryRunBeforeAblateDoesNotLaunch) {
  ChildResult r =
      run({"--dry-run", "ablate", fixture("minimal.yaml"), "--vary", "train.max_steps=5,6"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("ablate: 3 jobs"));
  EXPECT_THAT(r.out, HasSubstr("train.max_steps=6"));
  EXPECT_FALSE(std::filesystem::exists(home_.path() + "/.local/state/bridge-launch"))
      << "a dry-run wrote job state: it launched";
}

// Found by a new-user trial: a value a rule already derives (D1 turns param gather on in the
// demo) differs from the baseline only in its provenance and must not be a second job.
TEST_F(CliTest, AblateSkipsAValueThatAnOverlapRuleAlreadyChose) {
  const std::string demo = std::string(BRIDGE_SOURCE_DIR) + "/examples/recipes/demo.yaml";
  ChildResult r =
      run({"--dry-run", "ablate", demo, "--vary", "comm_overlap.overlap_grad_reduce=false",
           "--vary", "comm_overlap.overlap_param_gather=false,true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("variant [comm_overlap.overlap_param_gather=true] resolves to the "
                               "same plan as [baseline]"));
  EXPECT_THAT(r.err, HasSubstr("ablate: 3 jobs (baseline + 2 variants)"));
  // Nothing but the baseline left: nothing to compare, nothing submitted, exit 2.
  ChildResult only =
      run({"--dry-run", "ablate", demo, "--vary", "comm_overlap.overlap_param_gather=true"});
  EXPECT_EQ(only.exit_code, 2) << only.err;
  EXPECT_THAT(only.err, HasSubstr("ablate has nothing to compare"));
  EXPECT_EQ(only.out, "");
  ChildResult grid = run(
      {"--dry-run", "ablate", fixture("minimal.yaml"), "--grid", "--vary", "train.max_steps=5,6"});
  EXPECT_EQ(grid.exit_code, 0) << grid.err;
  EXPECT_THAT(grid.err, HasSubstr("ablate: 2 jobs (every combination of the --vary values)"));
}

// Numeric flags say their rule plainly (CLI11's own check printed DBL_MAX's 300 digits).
TEST_F(CliTest, ANumericFlagOutOfRangeSaysTheRulePlainly) {
  ChildResult r = run({"init", "-ng", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("must be a whole number >= 1, got `0`"));
  EXPECT_LT(r.err.size(), 300u) << r.err;
  ChildResult tail = run({"logs", "some-job", "--tail", "-1"});
  EXPECT_EQ(tail.exit_code, 2);
  EXPECT_THAT(tail.err, HasSubstr("must be a whole number >= 0, got `-1`"));
}

TEST_F(CliTest, ExecutorBeforeAblateAppliesToIt) {
  ChildResult r = run({"-e", "slurm", "ablate", "--dry-run", fixture("minimal.yaml"), "--vary",
                       "train.max_steps=5,6"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("#SBATCH --nodes"));
}

TEST_F(CliTest, StrictBeforeValidateIsStrict) {
  // TP overlap requested with tp == 1 is dropped: a warning, an error under --strict.
  const std::string dropped = "comm_overlap.tp_comm_overlap=true";
  ChildResult plain = run({"validate", fixture("minimal.yaml"), dropped});
  ChildResult after = run({"validate", "--strict", fixture("minimal.yaml"), dropped});
  ChildResult before = run({"--strict", "validate", fixture("minimal.yaml"), dropped});
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(after.exit_code, 2) << after.err;
  EXPECT_EQ(before.exit_code, 2) << before.err;
  ChildResult with_json_before = run({"--format", "json", "validate", fixture("minimal.yaml")});
  EXPECT_EQ(with_json_before.exit_code, 0) << with_json_before.err;
  EXPECT_TRUE(parse(with_json_before.out).is_object()) << with_json_before.out;
}

TEST_F(CliTest, OptionsASubcommandDoesNotTakeAreRefused) {
  expect_rejected(run({"validate", "--dry-run", fixture("minimal.yaml")}),
                  {"option `--dry-run` does not apply to `validate`"});
  expect_rejected(run({"--wait", "plan", fixture("minimal.yaml")}),
                  {"option `--wait` does not apply to `plan`"});
  expect_rejected(run({"-e", "slurm", "list"}), {"option `--executor` does not apply to `list`"});
  expect_rejected(run({"-ng", "8", "status"}), {"option `-ng` does not apply to `status`"});
}

// ---------------------------------------------------------------------------------------
// The runtime runs the plan: argv, -ng on the command line, pre-flight.

std::string example(const std::string& name) {
  return std::string(BRIDGE_SOURCE_DIR) + "/examples/recipes/" + name;
}

TEST_F(CliTest, NumGpusFromTheCommandLineReachesSchedulerAndRuntime) {
  const std::string qwen = example("qwen3-30b-a3b-ep-overlap.yaml");
  ChildResult dry = run({"--dry-run", "-e", "slurm", "-ng", "128", qwen});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_THAT(dry.out, HasSubstr("#SBATCH --nodes=16"));
  EXPECT_THAT(dry.out, HasSubstr("-ng 128"));
  ChildResult plan = run({"plan", "--format", "json", "-ng", "128", qwen});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  json argv = parse(plan.out)["argv"];
  auto ng = std::find(argv.begin(), argv.end(), "-ng");
  ASSERT_NE(ng, argv.end()) << argv.dump();
  EXPECT_EQ(*(ng + 1), "128");
}

TEST_F(CliTest, TwoLayoutsGiveDifferentScriptsAndManifests) {
  const std::string qwen = example("qwen3-30b-a3b-ep-overlap.yaml");
  for (const char* executor : {"slurm", "kubernetes"}) {
    ChildResult a = run({"--dry-run", "-e", executor, qwen});
    ChildResult b = run({"--dry-run", "-e", executor, qwen, "model.expert_model_parallel_size=8",
                         "model.tensor_model_parallel_size=2", "model.sequence_parallel=true"});
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_NE(a.out, b.out) << executor;
    // The sbatch script has the argv as words; the manifest as a YAML list.
    const std::string tp =
        executor == std::string("slurm") ? "-tp 2" : "- \"-tp\"\n              - \"2\"\n";
    EXPECT_THAT(b.out, HasSubstr(tp)) << executor;
    EXPECT_THAT(a.out, Not(HasSubstr(tp))) << executor;
  }
}

TEST_F(CliTest, PlanTextShowsTheCommandLineAndImage) {
  ChildResult r = run({"plan", example("qwen3-30b-a3b-ep-overlap.yaml")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("runtime command line (adapter megatron_bridge; every rank)"));
  EXPECT_THAT(r.out, HasSubstr("run_script.py -m qwen -mr qwen3_30b_a3b -g h100"));
  EXPECT_THAT(r.out, HasSubstr("container image: nvcr.io/nvidia/nemo:25.11"));
}

// The registry keeps no function of a secret: not the value given as an override, not a
// secret -E value, not a hash of either.
TEST_F(CliTest, SecretsGivenOnTheCommandLineNeverReachTheRegistry) {
  const std::string override_secret = "S3CRET-M4RKER-override";
  const std::string flag_secret = "T0KEN-M4RKER-flag";
  ChildResult r = run({fixture("minimal.yaml"), "runtime.command=[/bin/true]", "-E",
                       "WANDB_API_KEY=" + flag_secret,
                       "env.OVR={value: " + override_secret + ", secret: true}"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::filesystem::path state = home_.path() + "/.local/state/bridge-launch";
  int entries = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(state)) {
    if (!e.is_regular_file()) continue;
    std::string text = test::read_file(e.path().string());
    EXPECT_THAT(text, Not(HasSubstr(override_secret))) << e.path();
    EXPECT_THAT(text, Not(HasSubstr(flag_secret))) << e.path();
    EXPECT_THAT(text, Not(HasSubstr("fnv1a64"))) << e.path();
    if (e.path().extension() == ".json" && e.path().parent_path().filename() == "jobs") {
      ++entries;
      EXPECT_THAT(text, HasSubstr("env.OVR=<secret>"));
    }
  }
  EXPECT_EQ(entries, 1);
}

// No message holds a secret value (docs/reliability.md, item 5 of round 3): each path that
// once quoted one, in text and in `--format json`. A secret is known from the recipe's
// `secret: true` (file or override), also when the recipe fails to load.
TEST_F(CliTest, NoMessageQuotesASecretValue) {
  const std::string secret = "SEKRIT-M4RKER";
  auto expect_scrubbed = [&](const ChildResult& r, const std::string& what) {
    EXPECT_NE(r.exit_code, 0) << what;
    EXPECT_THAT(r.out + r.err, Not(HasSubstr(secret))) << what << "\n" << r.out << r.err;
    EXPECT_THAT(r.out + r.err, Not(HasSubstr("SEKRIT"))) << what;
  };
  // An override diagnostic quoting the whole override (text and JSON).
  std::string override_arg = "env.N={value: " + secret + ", secret: true, bogus: 1}";
  ChildResult quoted = run({"validate", fixture("minimal.yaml"), override_arg});
  expect_scrubbed(quoted, "override");
  EXPECT_THAT(quoted.err, HasSubstr("override 'env.N={value: <secret>, secret: true"));
  expect_scrubbed(run({"validate", "--format", "json", fixture("minimal.yaml"), override_arg}),
                  "override, json");
  // An env override that cannot be read: its value is not shown at all.
  ChildResult unread =
      run({"validate", fixture("minimal.yaml"), "env.N={value: " + secret + ", secret: true"});
  expect_scrubbed(unread, "unreadable override");
  EXPECT_THAT(unread.err, HasSubstr("override 'env.N=<value not shown>'"));
  // A secret written with quotes and escapes is scrubbed by its decoded value, which its
  // spelling does not contain: such an env override is quoted without its value.
  for (const char* spelled : {"env.N={value: \"SEK\\x52IT-M4RKER\", secret: true, bogus: 1}",
                              "env.N={value: 'SEK''RIT-M4RKER', secret: true, bogus: 1}"}) {
    ChildResult escaped = run({"validate", fixture("minimal.yaml"), spelled});
    expect_scrubbed(escaped, spelled);
    EXPECT_THAT(escaped.out + escaped.err, Not(HasSubstr("SEK"))) << spelled;
    EXPECT_THAT(escaped.err, HasSubstr("override 'env.N=<value not shown>'")) << escaped.err;
  }
  // The source excerpt of a flow-style secret line, the caret still under `bogus`.
  std::string flow = home_.path() + "/flow.yaml";
  std::ofstream(flow) << "name: t\nenv: {S: {value: " << secret << ", secret: true, bogus: 1}}\n";
  ChildResult excerpt = run({"validate", flow});
  expect_scrubbed(excerpt, "excerpt");
  EXPECT_THAT(excerpt.err, HasSubstr("| env: {S: {value: <secret>, secret: true, bogus: 1}}\n"
                                     "       |                                          ^"));
  // A secret that is not UTF-8 (yaml-not-utf8, reported before `secret: true` is read).
  std::string bytes = home_.path() + "/bytes.yaml";
  std::ofstream(bytes) << "name: t\nenv:\n  S: {value: \"SEKRIT-M4\xffRKER\", secret: true}\n";
  ChildResult utf8 = run({"validate", bytes});
  expect_scrubbed(utf8, "yaml-not-utf8");
  EXPECT_THAT(utf8.err, HasSubstr("yaml-not-utf8"));
  expect_scrubbed(run({"validate", "--format", "json", bytes}), "yaml-not-utf8, json");
  // ablate's variant labels (and the job names made from them).
  std::string base = home_.path() + "/ablate.yaml";
  std::ofstream(base) << "name: t\nenv: {S: {value: X, secret: true}}\n";
  ChildResult ablate =
      run({"ablate", base, "--vary", "env.S.value=" + secret + "1," + secret + "2", "--dry-run"});
  expect_scrubbed(ablate, "ablate");
  EXPECT_THAT(ablate.err, HasSubstr("env.S.value=<secret"));
}

// A secret written with YAML escapes or quote doubling is hidden in the source excerpt as
// written (its decoded value is not in the line), the caret still under `bogus`.
TEST_F(CliTest, NoExcerptShowsASecretWrittenWithEscapes) {
  const std::vector<std::string> spellings{
      R"("SEKRIT\\pa\x41ss")",  // double-quoted: \\ and \x41
      "'SEKRIT''s'",            // single-quoted: '' for '
      R"("SEKRIT\tTAB")",       // double-quoted: \t
  };
  for (const auto& spelling : spellings) {
    SCOPED_TRACE(spelling);
    std::string recipe = home_.write(
        "escaped.yaml", "name: t\nenv: {S: {value: " + spelling + ", secret: true, bogus: 1}}\n");
    for (const auto& args :
         std::vector<std::vector<std::string>>{{"validate", recipe}, {"--dry-run", recipe}}) {
      ChildResult r = run(args);
      EXPECT_EQ(r.exit_code, 2) << r.err;
      EXPECT_THAT(r.out + r.err, Not(HasSubstr("SEKRIT"))) << r.err;
      EXPECT_THAT(r.err, Not(HasSubstr(spelling.substr(1, spelling.size() - 2)))) << r.err;
      EXPECT_THAT(r.err, HasSubstr("| env: {S: {value: <secret>, secret: true, bogus: 1}}\n"
                                   "       |                                          ^"))
          << r.err;
    }
  }
}

TEST_F(CliTest, PlanJsonReportsEffectiveRetries) {
  ChildResult r = run({"plan", "--format", "json", "-e", "slurm", fixture("minimal.yaml"),
                       "executor.slurm.retries=2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(parse(r.out)["executor"]["retries"], 2);
}

// Everything --dry-run refuses for a reason bridge-launch can know, validate refuses too.
TEST_F(CliTest, ValidateRunsTheExecutorPreflight) {
  const std::string demo = example("demo.yaml");
  struct Case {
    std::vector<std::string> args;
    std::string code;
  };
  std::vector<Case> cases{
      {{"-e", "kubernetes", demo}, "k8s-container-image-required"},
      {{"-ng", "8", "-gn", "4", demo, "train.global_batch_size=8"}, "local-needs-one-node"},
      {{"-e", "slurm", demo, "executor.slurm.time=soon"}, ""},
      {{demo, "cluster.gpu=h10"}, "unknown-gpu"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> dry{"--dry-run"};
    dry.insert(dry.end(), c.args.begin(), c.args.end());
    std::vector<std::string> val{"validate"};
    val.insert(val.end(), c.args.begin(), c.args.end());
    ChildResult d = run(dry);
    ChildResult v = run(val);
    EXPECT_EQ(d.exit_code, 2) << ::testing::PrintToString(c.args) << d.err;
    EXPECT_EQ(v.exit_code, 2) << ::testing::PrintToString(c.args) << v.err;
    if (!c.code.empty()) {
      EXPECT_THAT(v.err, HasSubstr(c.code));
    }
  }
}

}  // namespace
}  // namespace bridge

namespace bridge {
namespace {

// `why` on a local job: rank 2 fails with a CUDA error while the others lose their peer and
// are stopped; `why` names rank 2 and shows the traceback, `status JOB` the short summary.
TEST_F(CliTest, WhyNamesTheFirstFailingLocalRankAndItsTraceback) {
  std::string recipe = home_.write("why.yaml", R"(name: why-local
cluster: {gpu: h100, num_gpus: 4, gpus_per_node: 4}
runtime:
  adapter: none
  command:
    - bash
    - -c
    - |
      if [ "$RANK" = 2 ]; then
        sleep 0.5
        echo "Traceback (most recent call last):"
        echo '  File "train.py", line 10, in <module>'
        echo "RuntimeError: CUDA error: an illegal memory access was encountered"
        exit 17
      fi
      trap 'echo "[rank$RANK]: NCCL WARN NET/Socket : Connection closed by remote peer"; exit 1' TERM
      sleep 30 & wait
executor:
  local: {grace_period: 5}
)");
  std::map<std::string, std::string> env{{"BRIDGE_LAUNCH_STATE_DIR", home_.path() + "/state"}};
  ChildResult launch = run({"-q", recipe, "executor.local.job_dir=" + home_.path() + "/jobs"}, env);
  EXPECT_EQ(launch.exit_code, 1) << launch.err;

  ChildResult why = run({"why", "why-local"}, env);
  EXPECT_EQ(why.exit_code, 1) << "the job failed\n" << why.err;
  EXPECT_THAT(why.out, HasSubstr("first failure: rank 2 on "));
  EXPECT_THAT(why.out, HasSubstr(", exit code 17"));
  EXPECT_THAT(why.out, HasSubstr("| Traceback (most recent call last):"));
  EXPECT_THAT(why.out, HasSubstr("| RuntimeError: CUDA error: an illegal memory access"));
  EXPECT_THAT(why.out, HasSubstr("ranks 0, 1, 3 (3): lost its peer"));

  json j = parse(run({"why", "why-local", "--format", "json"}, env).out);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["first_failure"]["rank"], 2);
  EXPECT_EQ(j["first_failure"]["exit_code"], 17);
  EXPECT_EQ(j["first_failure"]["signature"], "cuda-error");
  EXPECT_EQ(j["consequences"][0]["count"], 3);

  ChildResult status = run({"status", "why-local"}, env);
  EXPECT_THAT(status.out, HasSubstr("first failure: rank 2 on "));
  EXPECT_THAT(status.out, HasSubstr("CUDA error: RuntimeError: CUDA error"));
  EXPECT_THAT(status.out, Not(HasSubstr("| Traceback")));  // the excerpt is `why`'s
}

// A job id that is not in the registry is a usage error, like every job command.
TEST_F(CliTest, WhyOfAnUnknownJobIsAUsageError) {
  ChildResult r = run({"why", "no-such-job"}, {{"BRIDGE_LAUNCH_STATE_DIR", home_.path()}});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace bridge
