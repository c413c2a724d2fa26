// bridge-probe's emulated overlaps end to end: real probe ranks (2 or 4 processes on this
// machine) get the overlap fields as the probe adapter forwards them (`comm_overlap.X=V`), and
// every field must move the probe's measured exposed communication of its kind the expected
// way. Each comparison runs on/off on the same emulated link and asserts a direction with a
// margin (a ratio), never a wall-clock time. The results of every collective are checked by the
// probe itself every step; the corruption tests prove that a wrong value stops every rank.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "process_util.h"
#include "tests/support/build_paths.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::start_background;
using test::wait_exit;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kExitUsage = 2;
constexpr int kExitWrongResult = 4;

struct RankRuns {
  std::vector<int> exit_codes;
  std::vector<std::string> logs;  // stdout and stderr of each rank

  const std::string& rank0() const { return logs[0]; }
  bool all_exited(int code) const {
    for (const int c : exit_codes)
      if (c != code) return false;
    return true;
  }
};

// Small phases: 2 micro-batches x 2 layers of 10 ms forward device time, 64 tokens x 256 floats
// (64 KiB) per micro-batch, a tiny gradient all-reduce, 4 steps (3 steady ones).
const std::vector<std::string> kSmall{
    "--steps",    "4",  "--compute-ms",   "2",  "--params",  "4096",
    "--layers",   "2",  "--tokens",       "64", "--hidden",  "256",
    "--layer-ms", "10", "--microbatches", "2",  "--timeout", "30"};

RankRuns RunRanks(int world, const std::vector<std::string>& args) {
  test::TempDir dir;
  const int port = test::free_port();
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world; ++rank) {
    std::vector<std::string> argv{BRIDGE_PROBE_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::map<std::string, std::string> env{{"RANK", std::to_string(rank)},
                                                 {"WORLD_SIZE", std::to_string(world)},
                                                 {"MASTER_ADDR", "127.0.0.1"},
                                                 {"MASTER_PORT", std::to_string(port)},
                                                 {"BRIDGE_PROBE_PORT", std::to_string(port)}};
    pids.push_back(
        start_background(argv, env, fs::path(dir.path()) / ("rank" + std::to_string(rank))));
  }
  RankRuns run;
  for (int rank = 0; rank < world; ++rank) {
    run.exit_codes.push_back(wait_exit(pids[static_cast<size_t>(rank)], 90));
    run.logs.push_back(read_file(dir.path() + "/rank" + std::to_string(rank)));
  }
  return run;
}

std::vector<std::string> With(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// A steady-state figure (ms) of one kind from rank 0's summary line
// `overlap efficiency (<kind>): ... | <label> (ms): X |`, e.g. "exposed comm" or "compute".
std::optional<double> Figure(const std::string& out, const std::string& kind,
                             const std::string& label) {
  const std::regex line("overlap efficiency \\(" + kind + "\\): [^\n]*\\| " + label +
                        " \\(ms\\): ([0-9.]+) \\|");
  std::smatch m;
  if (!std::regex_search(out, m, line)) return std::nullopt;
  return std::stod(m[1].str());
}

// Rank 0's steady-state exposed communication of one kind.
std::optional<double> Exposed(const std::string& out, const std::string& kind) {
  return Figure(out, kind, "exposed comm");
}

// Runs `base` with `field=off_value` and `field=on_value` and checks that the exposed time of
// `kind` with the overlap on is below `ratio` times the time with it off.
// Exposed time is wall-clock time on a shared machine: another test's ranks on the same two
// cores add to it. So each value is the least of up to three runs (load only ever adds), and
// the runs stop as soon as the comparison holds.
void ExpectLessExposed(int world, const std::vector<std::string>& base, const std::string& field,
                       const std::string& off_value, const std::string& on_value,
                       const std::string& kind, double ratio) {
  std::optional<double> least_off, least_on;
  std::string last_on_log;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const RankRuns off = RunRanks(world, With(base, {field + "=" + off_value}));
    const RankRuns on = RunRanks(world, With(base, {field + "=" + on_value}));
    ASSERT_TRUE(off.all_exited(0)) << off.rank0() << off.logs.back();
    ASSERT_TRUE(on.all_exited(0)) << on.rank0() << on.logs.back();
    const auto exposed_off = Exposed(off.rank0(), kind);
    const auto exposed_on = Exposed(on.rank0(), kind);
    ASSERT_TRUE(exposed_off && exposed_on) << off.rank0() << on.rank0();
    ASSERT_GT(*exposed_off, 0.0) << off.rank0();
    least_off = std::min(least_off.value_or(*exposed_off), *exposed_off);
    least_on = std::min(least_on.value_or(*exposed_on), *exposed_on);
    last_on_log = on.rank0();
    if (*least_on < ratio * *least_off) break;
  }
  EXPECT_LT(*least_on, ratio * *least_off)
      << field << ": exposed " << kind << " " << *least_on << " ms with " << on_value << ", "
      << *least_off << " ms with " << off_value << " (least of three runs each)\n"
      << last_on_log;
}

class ProbeOverlap : public ::testing::Test {
 protected:
  void SetUp() override {
    // Only what each test passes decides the overlap, not the runner's environment.
    unsetenv("BRIDGE_OVERLAP_GRAD_REDUCE");
    unsetenv("BRIDGE_EXPECTED_PLAN");
    unsetenv("BRIDGE_EXPECTED_ENV");
  }
};

TEST_F(ProbeOverlap, ExpertParallelOverlapHidesTheAllToAll) {
  ExpectLessExposed(2, With(kSmall, {"--link-gbps", "0.05", "model.expert_model_parallel_size=2"}),
                    "comm_overlap.overlap_moe_expert_parallel_comm", "false", "true", "ep-a2a",
                    0.7);
}

TEST_F(ProbeOverlap, DelayedWgradHidesTheCombineBehindTheWeightGradient) {
  ExpectLessExposed(2,
                    With(kSmall, {"--link-gbps", "0.05", "model.expert_model_parallel_size=2",
                                  "comm_overlap.overlap_moe_expert_parallel_comm=true"}),
                    "comm_overlap.delay_wgrad_compute", "false", "true", "ep-a2a", 0.85);
}

TEST_F(ProbeOverlap, TpCommOverlapPipelinesAllGatherAndReduceScatterWithTheGemm) {
  ExpectLessExposed(2,
                    With(kSmall, {"--link-gbps", "0.1", "model.tensor_model_parallel_size=2",
                                  "model.sequence_parallel=true"}),
                    "comm_overlap.tp_comm_overlap", "false", "true", "tp", 0.8);
}

TEST_F(ProbeOverlap, TpOverlapWithoutSequenceParallelIsRefusedAtRunTime) {
  const RankRuns run =
      RunRanks(2, With(kSmall, {"--link-gbps", "0.1", "model.tensor_model_parallel_size=2",
                                "comm_overlap.tp_comm_overlap=true"}));
  ASSERT_TRUE(run.all_exited(0)) << run.rank0();
  EXPECT_THAT(run.rank0(), HasSubstr("tp_comm_overlap=true refused: TP overlap needs "
                                     "sequence_parallel"));
  EXPECT_THAT(run.rank0(), HasSubstr("overlap knob tp_comm_overlap=true: REFUSED"));
  EXPECT_TRUE(Exposed(run.rank0(), "tp")) << run.rank0();
}

TEST_F(ProbeOverlap, P2pOverlapHidesTheExchangeWithVirtualStages) {
  ExpectLessExposed(2,
                    With(kSmall, {"--link-gbps", "0.05", "model.pipeline_model_parallel_size=2",
                                  "model.virtual_pipeline_model_parallel_size=2"}),
                    "comm_overlap.overlap_p2p_comm", "false", "true", "pp-p2p", 0.7);
}

TEST_F(ProbeOverlap, BatchedP2pExposesLessThanSendThenReceive) {
  ExpectLessExposed(2,
                    With(kSmall, {"--link-gbps", "0.05", "model.pipeline_model_parallel_size=2"}),
                    "comm_overlap.batch_p2p_comm", "false", "true", "pp-p2p", 0.8);
}

TEST_F(ProbeOverlap, P2pOverlapWithoutVirtualPipelineIsRefusedAsMegatronCoreDoes) {
  const RankRuns run = RunRanks(2, With(kSmall, {"model.pipeline_model_parallel_size=2",
                                                 "comm_overlap.overlap_p2p_comm=true"}));
  EXPECT_TRUE(run.all_exited(kExitUsage)) << run.rank0();
  EXPECT_THAT(run.rank0(), HasSubstr("overlap_p2p_comm=true with pp > 1 needs the interleaved "
                                     "schedule"));
}

TEST_F(ProbeOverlap, GradReduceOverlapHidesTheBucketAllReduce) {
  ExpectLessExposed(2,
                    {"--steps", "4", "--compute-ms", "40", "--params", "65536", "--buckets", "16",
                     "--link-gbps", "0.05", "--timeout", "30"},
                    "comm_overlap.overlap_grad_reduce", "false", "true", "dp-grad", 0.6);
}

TEST_F(ProbeOverlap, ParamGatherOverlapHidesTheAllGatherBehindTheForward) {
  ExpectLessExposed(
      2,
      {"--steps", "4", "--compute-ms", "40", "--params", "65536", "--buckets", "8", "--link-gbps",
       "0.05", "--timeout", "30", "ddp.use_distributed_optimizer=true"},
      "comm_overlap.overlap_param_gather", "false", "true", "dp-param", 0.7);
}

// The optimizer step (half the forward's device time) writes each bucket's shard; with the
// field on, the first bucket's all-gather runs during the rest of the step instead of in front
// of the forward.
TEST_F(ProbeOverlap, ParamGatherWithOptimizerStepHidesTheFirstGather) {
  ExpectLessExposed(
      2,
      {"--steps", "4", "--compute-ms", "120", "--params", "65536", "--buckets", "4", "--link-gbps",
       "0.025", "--timeout", "30", "ddp.use_distributed_optimizer=true",
       "comm_overlap.overlap_param_gather=true"},
      "comm_overlap.overlap_param_gather_with_optimizer_step", "false", "true", "dp-param", 0.5);
}

// pp 2 x vpp 2 x dp 2: without alignment each model chunk's first all-gather is exposed when
// that chunk first runs; aligned, both chunks' gathers start together and only one is.
TEST_F(ProbeOverlap, AlignParamGatherLaunchesEveryChunksGatherTogether) {
  ExpectLessExposed(4,
                    {"--steps",
                     "4",
                     "--compute-ms",
                     "120",
                     "--params",
                     "65536",
                     "--buckets",
                     "4",
                     "--link-gbps",
                     "0.03",
                     "--timeout",
                     "30",
                     "--microbatches",
                     "1",
                     "--layers",
                     "2",
                     "--layer-ms",
                     "1",
                     "--tokens",
                     "8",
                     "--hidden",
                     "16",
                     "ddp.use_distributed_optimizer=true",
                     "comm_overlap.overlap_param_gather=true",
                     "model.pipeline_model_parallel_size=2",
                     "model.virtual_pipeline_model_parallel_size=2"},
                    "comm_overlap.align_param_gather", "false", "true", "dp-param", 0.75);
}

// The last stage's output-layer wgrad (one layer's forward time per micro-batch) delays every
// backward exchange; deferred, it runs at the end while the last exchange is in flight.
const std::vector<std::string> kDeferBase =
    With(kSmall, {"--link-gbps", "0.1", "model.pipeline_model_parallel_size=2",
                  "comm_overlap.batch_p2p_comm=true", "comm_overlap.wgrad_deferral_limit=0"});

TEST_F(ProbeOverlap, DeferredEmbeddingWgradLeavesTheBackwardExchangesEarlier) {
  ExpectLessExposed(2, kDeferBase, "comm_overlap.defer_embedding_wgrad_compute", "false", "true",
                    "pp-p2p", 0.8);
}

// wgrad_deferral_limit as Megatron-Core reads it: 0 defers every micro-batch, 1 only the first
// (so more stays exposed), and a negative limit with the deferral on is refused.
TEST_F(ProbeOverlap, DeferralLimitZeroDefersMoreThanLimitOneAndNegativeIsRefused) {
  const auto defer = With(kDeferBase, {"comm_overlap.defer_embedding_wgrad_compute=true"});
  ExpectLessExposed(2, defer, "comm_overlap.wgrad_deferral_limit", "1", "0", "pp-p2p", 0.9);
  const RankRuns refused = RunRanks(2, With(defer, {"comm_overlap.wgrad_deferral_limit=-1"}));
  EXPECT_TRUE(refused.all_exited(kExitUsage)) << refused.rank0();
  EXPECT_THAT(refused.rank0(), HasSubstr("refuses a negative limit when the deferral is on"));
}

// tp 2: the first preset's fc2_fprop is ring_exchange (tp = 2 chunks per GEMM), the second's a
// pipeline of num_splits 4: more, smaller pieces leave less of the collectives exposed.
TEST_F(ProbeOverlap, UserbuffersPresetWithMoreSplitsExposesLessTpCommunication) {
  ExpectLessExposed(
      2,
      With(kSmall, {"--link-gbps", "0.1", "model.tensor_model_parallel_size=2",
                    "model.sequence_parallel=true", "comm_overlap.tp_comm_overlap=true"}),
      "comm_overlap.tp_comm_overlap_cfg", "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192",
      "userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192", "tp", 0.8);
}

// With one bucket the all-reduce starts after the whole backward pass; with 16 it starts
// after the first sixteenth and runs beside the rest. What that can hide is bounded by the
// compute it runs beside, so the test asks that at least half of it is hidden: a fixed ratio
// of the two exposed times would test the probe's compute calibration instead (on a loaded
// machine the compute phase came out at 27 ms of the 40 asked for, and the ratio at 0.61).
TEST_F(ProbeOverlap, SmallerBucketsLetTheOverlappedAllReduceStartEarlier) {
  const std::vector<std::string> base{"--steps",
                                      "4",
                                      "--compute-ms",
                                      "40",
                                      "--params",
                                      "65536",
                                      "--link-gbps",
                                      "0.05",
                                      "--timeout",
                                      "30",
                                      "comm_overlap.overlap_grad_reduce=true"};
  double hidden = 0, half_compute = 0;
  std::string last_on_log;
  for (int attempt = 0; attempt < 3; ++attempt) {  // load only ever adds exposed time
    const RankRuns big = RunRanks(2, With(base, {"comm_overlap.bucket_size=65536"}));
    const RankRuns small = RunRanks(2, With(base, {"comm_overlap.bucket_size=4096"}));
    ASSERT_TRUE(big.all_exited(0) && small.all_exited(0)) << big.rank0() << small.rank0();
    const auto exposed_big = Exposed(big.rank0(), "dp-grad");
    const auto exposed_small = Exposed(small.rank0(), "dp-grad");
    const auto compute_small = Figure(small.rank0(), "dp-grad", "compute");
    ASSERT_TRUE(exposed_big && exposed_small && compute_small) << big.rank0() << small.rank0();
    ASSERT_GT(*compute_small, 0.0) << small.rank0();
    hidden = std::max(hidden, *exposed_big - *exposed_small);
    half_compute = 0.5 * std::min(*compute_small, *exposed_big);
    last_on_log = small.rank0();
    if (hidden > half_compute) break;
  }
  EXPECT_GT(hidden, half_compute) << "16 buckets hid " << hidden
                                  << " ms of the all-reduce; half of the compute beside it is "
                                  << half_compute << " ms\n"
                                  << last_on_log;
}

// Every phase at once on 4 ranks, each overlap on: groups from the Megatron order, results
// checked every step, and one exposed figure per kind.
TEST_F(ProbeOverlap, AllPhasesTogetherOnFourRanks) {
  const RankRuns run = RunRanks(
      4, With(kSmall, {"--link-gbps", "0.2", "model.tensor_model_parallel_size=2",
                       "model.sequence_parallel=true", "model.pipeline_model_parallel_size=2",
                       "model.virtual_pipeline_model_parallel_size=2",
                       "model.expert_model_parallel_size=2", "model.expert_tensor_parallel_size=1",
                       "comm_overlap.tp_comm_overlap=true", "comm_overlap.overlap_p2p_comm=true",
                       "comm_overlap.overlap_moe_expert_parallel_comm=true",
                       "comm_overlap.delay_wgrad_compute=true"}));
  ASSERT_TRUE(run.all_exited(0)) << run.rank0() << run.logs[3];
  EXPECT_THAT(run.rank0(), HasSubstr("groups of rank 0: tp [0,1], pp [0,2], dp [0], ep [0,1]"));
  for (const char* kind : {"ep-a2a", "tp", "pp-p2p", "dp-grad"})
    EXPECT_TRUE(Exposed(run.rank0(), kind)) << kind << "\n" << run.rank0();
  EXPECT_THAT(run.rank0(), HasSubstr("bridge-probe: OK"));
}

TEST_F(ProbeOverlap, AWrongValueInAnyPhaseStopsEveryRankWithExitFour) {
  for (const auto& [phase, layout] : std::vector<std::pair<std::string, std::string>>{
           {"ep", "model.expert_model_parallel_size=2"},
           {"tp", "model.tensor_model_parallel_size=2"},
           {"pp", "model.pipeline_model_parallel_size=2"}}) {
    const RankRuns run =
        RunRanks(2, With(kSmall, {"--corrupt-rank", "1", "--corrupt-at-step", "2", "--corrupt-in",
                                  phase, layout, "model.sequence_parallel=true"}));
    EXPECT_TRUE(run.all_exited(kExitWrongResult)) << phase << "\n" << run.rank0() << run.logs[1];
    const std::string both = run.logs[0] + run.logs[1];
    EXPECT_THAT(both, HasSubstr("wrong collective result on rank")) << phase;
    EXPECT_THAT(both, HasSubstr("step 2, " + phase)) << phase << "\n" << both;
  }
}

// What the demo shows: each forwarded field says what it does in this run; none is silently
// accepted.
TEST_F(ProbeOverlap, EveryForwardedFieldSaysWhatItChanges) {
  const std::vector<std::string> fields{
      "tp_comm_overlap=false",
      "tp_comm_overlap_cfg=userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192",
      "tp_comm_bootstrap_backend=nccl",
      "overlap_p2p_comm=false",
      "batch_p2p_comm=false",
      "defer_embedding_wgrad_compute=false",
      "wgrad_deferral_limit=-1",
      "overlap_moe_expert_parallel_comm=false",
      "delay_wgrad_compute=false",
      "overlap_grad_reduce=true",
      "overlap_param_gather=true",
      "overlap_param_gather_with_optimizer_step=false",
      "align_param_gather=false",
      "bucket_size=134217728"};
  std::vector<std::string> args{"--steps",   "2",        "--compute-ms",
                                "2",         "--params", "4096",
                                "--timeout", "30",       "ddp.use_distributed_optimizer=true"};
  for (const auto& f : fields) args.push_back("comm_overlap." + f);
  const RankRuns run = RunRanks(2, args);
  ASSERT_TRUE(run.all_exited(0)) << run.rank0();
  for (const auto& f : fields)
    EXPECT_THAT(run.rank0(), HasSubstr("bridge-probe: overlap knob " + f + ": ")) << f;
  EXPECT_THAT(run.rank0(), Not(HasSubstr("accepted, no effect")));
  EXPECT_THAT(run.rank0(), Not(HasSubstr("not modeled: ")));
  EXPECT_THAT(run.rank0(), HasSubstr("overlap knob tp_comm_bootstrap_backend=nccl: bootstrap "
                                     "only: no effect on step time, nothing to emulate"));
  EXPECT_THAT(run.rank0(), HasSubstr("env check: CUDA_DEVICE_MAX_CONNECTIONS is"));
  EXPECT_THAT(run.rank0(), HasSubstr("cannot show its effect"));
}

// Without --microbatches the probe runs global batch / (micro batch x dp) micro-batches per
// step, an unset micro batch being 1 as in Megatron-Core: a global batch of 4 at dp 2 is two
// (it printed one before, as if the global batch were unset; issue 47).
TEST_F(ProbeOverlap, AnUnsetMicroBatchIsOneWhenCountingMicroBatches) {
  const std::vector<std::string> args{"--steps",   "1",  "--compute-ms", "1", "--params",   "1024",
                                      "--timeout", "30", "--layers",     "1", "--layer-ms", "1"};
  const RankRuns unset = RunRanks(2, With(args, {"train.global_batch_size=4"}));
  ASSERT_TRUE(unset.all_exited(0)) << unset.rank0();
  EXPECT_THAT(unset.rank0(), HasSubstr("phases: 2 micro-batches x 1 layers")) << unset.rank0();
  const RankRuns two =
      RunRanks(2, With(args, {"train.global_batch_size=4", "train.micro_batch_size=2"}));
  ASSERT_TRUE(two.all_exited(0)) << two.rank0();
  EXPECT_THAT(two.rank0(), HasSubstr("phases: 1 micro-batches x 1 layers")) << two.rank0();
}

}  // namespace
}  // namespace bridge
