// bridge-probe's plan check end to end: the real probe binary, run as one or two real ranks, with
// BRIDGE_EXPECTED_PLAN in its env and Hydra-style overrides in its argv (what bridge-launch does).
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "process_util.h"
#include "tests/support/build_paths.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

namespace fs = std::filesystem;
using test::ChildResult;
using test::read_file;
using test::run_command;
using test::start_background;
using test::wait_exit;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kExitMismatch = 3;  // The probe's exit code for a failed env or plan check.

class ProbePlanCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The checks must see only what each test passes, not a plan the test runner inherited.
    unsetenv("BRIDGE_EXPECTED_PLAN");
    unsetenv("BRIDGE_EXPECTED_ENV");
  }

  // One rank (RANK=0, WORLD_SIZE=1) with a short, cheap training loop; `plan` unset when empty.
  static ChildResult probe(const std::vector<std::string>& args, const std::string& plan) {
    std::vector<std::string> argv{BRIDGE_PROBE_BIN, "--compute-ms", "1", "--params",
                                  "4096",           "--buckets",    "2"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::map<std::string, std::string> env{{"RANK", "0"}, {"WORLD_SIZE", "1"}};
    if (!plan.empty()) env["BRIDGE_EXPECTED_PLAN"] = plan;
    return run_command(argv, env);
  }
};

std::string Escaped(const std::string& text) {
  static const std::regex kSpecial(R"([.*+?()^$|{}\[\]\\/])");
  return std::regex_replace(text, kSpecial, R"(\$&)");
}

// Whether `out` has the table row: field, planned and received columns, then the status.
::testing::AssertionResult HasRow(const std::string& out, const std::string& field,
                                  const std::string& planned, const std::string& received,
                                  const std::string& status) {
  const std::regex row("\n  " + Escaped(field) + " +" + Escaped(planned) + " +" +
                       Escaped(received) + " +" + Escaped(status) + "\n");
  if (std::regex_search(out, row)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "no row '" << field << " | " << planned << " | "
                                       << received << " | " << status << "' in:\n"
                                       << out;
}

int IterationLines(const std::string& out) {
  static const std::regex kIteration(R"(iteration +\d+/ +\d+ \|)");
  return static_cast<int>(std::distance(std::sregex_iterator(out.begin(), out.end(), kIteration),
                                        std::sregex_iterator()));
}

TEST_F(ProbePlanCheckTest, MatchingPlanPrintsOkRowsAndRuns) {
  const std::string plan =
      "cluster.gpu=h100;cluster.num_gpus=1;model.tensor_model_parallel_size=1;"
      "model.virtual_pipeline_model_parallel_size=null;model.precision=bf16;train.max_steps=2";
  ChildResult r =
      probe({"cluster.gpu=h100", "cluster.num_gpus=1", "model.tensor_model_parallel_size=1",
             "model.virtual_pipeline_model_parallel_size=null", "model.precision=bf16",
             "train.max_steps=2", "comm_overlap.overlap_grad_reduce=true"},
            plan);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("plan check: 6 planned values, 1 ranks"));
  EXPECT_TRUE(HasRow(r.out, "cluster.gpu", "h100", "h100", "ok"));
  EXPECT_TRUE(HasRow(r.out, "model.tensor_model_parallel_size", "1", "1", "ok"));
  EXPECT_TRUE(HasRow(r.out, "model.virtual_pipeline_model_parallel_size", "null", "null", "ok"));
  EXPECT_TRUE(HasRow(r.out, "world size (WORLD_SIZE)", "1", "1", "ok"));
  EXPECT_TRUE(HasRow(r.out, "dp = num_gpus/(tp*pp*cp)", "1/(1*1*1)=1", "1/(1*1*1)=1", "ok"));
  EXPECT_THAT(r.out, HasSubstr("plan check: all ranks match"));
  EXPECT_THAT(r.out, Not(HasSubstr("MISMATCH")));
  EXPECT_THAT(r.out, HasSubstr("bridge-probe: OK"));
  EXPECT_THAT(r.err, Not(HasSubstr("plan mismatch")));
}

TEST_F(ProbePlanCheckTest, LaterConflictingOverrideWinsAndFails) {
  ChildResult r =
      probe({"model.tensor_model_parallel_size=1", "model.tensor_model_parallel_size=2"},
            "model.tensor_model_parallel_size=1");
  EXPECT_EQ(r.exit_code, kExitMismatch) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("plan mismatch: rank 0: model.tensor_model_parallel_size: "
                               "planned 1, received 2"));
  EXPECT_TRUE(HasRow(r.out, "model.tensor_model_parallel_size", "1", "2", "MISMATCH"));
  EXPECT_THAT(r.out, HasSubstr("plan check: MISMATCH"));
  EXPECT_THAT(r.err, HasSubstr("plan check failed"));
  EXPECT_EQ(IterationLines(r.out), 0) << "a failed plan check must stop before training";
}

TEST_F(ProbePlanCheckTest, MissingOverrideIsAMismatch) {
  ChildResult r = probe({}, "model.precision=bf16");
  EXPECT_EQ(r.exit_code, kExitMismatch) << r.out << r.err;
  EXPECT_THAT(
      r.err, HasSubstr("plan mismatch: rank 0: model.precision: planned bf16, received (missing)"));
}

TEST_F(ProbePlanCheckTest, NumGpusThatIsNotTheWorldSizeIsAMismatch) {
  ChildResult r = probe({"cluster.num_gpus=4"}, "cluster.num_gpus=4");
  EXPECT_EQ(r.exit_code, kExitMismatch) << r.out << r.err;
  EXPECT_TRUE(HasRow(r.out, "cluster.num_gpus", "4", "4", "ok"));
  EXPECT_TRUE(HasRow(r.out, "world size (WORLD_SIZE)", "4", "1", "MISMATCH"));
  EXPECT_THAT(r.err, HasSubstr("plan mismatch: rank 0: world size (WORLD_SIZE): planned 4, "
                               "received 1"));
}

TEST_F(ProbePlanCheckTest, ParallelSizesThatDoNotDivideNumGpusAreAMismatch) {
  const std::string plan = "cluster.num_gpus=1;model.pipeline_model_parallel_size=2";
  ChildResult r = probe({"cluster.num_gpus=1", "model.pipeline_model_parallel_size=2"}, plan);
  EXPECT_EQ(r.exit_code, kExitMismatch) << r.out << r.err;
  EXPECT_TRUE(HasRow(r.out, "model.pipeline_model_parallel_size", "2", "2", "ok"));
  EXPECT_TRUE(HasRow(r.out, "dp = num_gpus/(tp*pp*cp)", "1/(1*2*1) not divisible",
                     "1/(1*2*1) not divisible", "MISMATCH"));
}

TEST_F(ProbePlanCheckTest, StepsFlagThatDiffersFromThePlanIsAMismatch) {
  ChildResult r = probe({"--steps", "5", "train.max_steps=8"}, "train.max_steps=8");
  EXPECT_EQ(r.exit_code, kExitMismatch) << r.out << r.err;
  EXPECT_TRUE(HasRow(r.out, "train.max_steps", "8", "8", "ok"));
  EXPECT_THAT(r.err, HasSubstr("plan mismatch: rank 0: steps: planned 8, received 5 (--steps)"));
}

TEST_F(ProbePlanCheckTest, StepsAndGlobalBatchDefaultToThePlannedOverrides) {
  ChildResult r = probe({"train.max_steps=3", "train.global_batch_size=16"},
                        "train.max_steps=3;train.global_batch_size=16");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(HasRow(r.out, "steps", "3", "3 (train.max_steps)", "ok"));
  EXPECT_TRUE(HasRow(r.out, "global batch", "16", "16 (train.global_batch_size)", "ok"));
  EXPECT_EQ(IterationLines(r.out), 3) << r.out;
  EXPECT_TRUE(
      std::regex_search(r.out, std::regex(R"(iteration +3/ +3 \| consumed samples: +48 \|)")))
      << r.out;
}

TEST_F(ProbePlanCheckTest, WithoutAPlanTheCheckIsSkippedAndOverridesStillSetTheSteps) {
  ChildResult r = probe({"train.max_steps=2", "model.precision=fp8"}, "");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("plan check: skipped (no BRIDGE_EXPECTED_PLAN)\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("plan check: MISMATCH")));
  EXPECT_EQ(IterationLines(r.out), 2) << r.out;
}

// Without a plan nothing checks the layout before training, but the probe builds its groups
// from it, so a layout that cannot fit the world stops it before the first step.
TEST_F(ProbePlanCheckTest, WithoutAPlanALayoutThatDoesNotFitTheWorldIsAUsageError) {
  ChildResult r = probe({"train.max_steps=2", "model.tensor_model_parallel_size=7"}, "");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("layout from the plan: tp*pp*cp = 7 does not divide the world "
                               "size 1"));
  EXPECT_EQ(IterationLines(r.out), 0) << r.out;
}

TEST_F(ProbePlanCheckTest, MalformedPlanIsAUsageError) {
  ChildResult r = probe({}, "model.precision");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("BRIDGE_EXPECTED_PLAN: entry 'model.precision' is not key=value"));
}

TEST_F(ProbePlanCheckTest, ConflictOnRankOneFailsBothRanksWithoutAHang) {
  test::TempDir dir;
  const int port = test::free_port();
  ASSERT_GT(port, 0);
  const std::string plan = "cluster.num_gpus=2;model.tensor_model_parallel_size=1";
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> argv{BRIDGE_PROBE_BIN,
                                  "--compute-ms",
                                  "1",
                                  "--params",
                                  "4096",
                                  "--timeout",
                                  "20",
                                  "cluster.num_gpus=2",
                                  "model.tensor_model_parallel_size=1"};
    if (rank == 1) argv.emplace_back("model.tensor_model_parallel_size=2");
    const std::map<std::string, std::string> env{{"RANK", std::to_string(rank)},
                                                 {"WORLD_SIZE", "2"},
                                                 {"MASTER_ADDR", "127.0.0.1"},
                                                 {"MASTER_PORT", std::to_string(port)},
                                                 {"BRIDGE_PROBE_PORT", std::to_string(port)},
                                                 {"BRIDGE_EXPECTED_PLAN", plan}};
    pids.push_back(
        start_background(argv, env, fs::path(dir.path()) / ("rank" + std::to_string(rank))));
  }
  // Bounded waits: a rank left waiting for the verdict would show up as -1 (killed), not a hang.
  const int rank1_exit = wait_exit(pids[1], 60);
  const int rank0_exit = wait_exit(pids[0], 60);
  const std::string out0 = read_file(dir.path() + "/rank0");
  const std::string out1 = read_file(dir.path() + "/rank1");
  EXPECT_EQ(rank1_exit, kExitMismatch) << out1;
  EXPECT_EQ(rank0_exit, kExitMismatch) << out0;
  EXPECT_THAT(out1, HasSubstr("plan mismatch: rank 1: model.tensor_model_parallel_size: "
                              "planned 1, received 2"));
  EXPECT_THAT(out0, Not(HasSubstr("plan mismatch: rank 0")));
  EXPECT_THAT(out0, HasSubstr("plan check: 2 planned values, 2 ranks"));
  EXPECT_TRUE(
      HasRow(out0, "model.tensor_model_parallel_size", "1", "1", "MISMATCH  differ: rank 1 (2)"));
  EXPECT_TRUE(HasRow(out0, "world size (WORLD_SIZE)", "2", "2", "ok"));
  EXPECT_THAT(out0, HasSubstr("plan check: MISMATCH"));
  EXPECT_EQ(IterationLines(out0), 0) << out0;
}

}  // namespace
}  // namespace bridge
