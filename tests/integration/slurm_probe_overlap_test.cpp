// The MoE expert-parallel overlap ablation of examples/recipes/moe-probe-ep-overlap.yaml on the
// local two-node Slurm test cluster (scripts/slurm-test-cluster.sh up): 16 bridge-probe ranks,
// 8 per node, EP=16 all-to-all over the emulated link: EP overlap on, off, and with delayed wgrad.
//
// Skips (with the reason) when `sinfo` is missing or the cluster is not up, like
// slurm_cluster_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <regex>
#include <string>

#include "process_util.h"
#include "tests/support/build_paths.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

using test::run_command;
using test::TempDir;
using ::testing::HasSubstr;

const std::string kRecipe =
    std::string(BRIDGE_SOURCE_DIR) + "/examples/recipes/moe-probe-ep-overlap.yaml";

std::string SkipReason() {
  if (run_command({"/bin/sh", "-c", "command -v sinfo"}).exit_code != 0)
    return "sinfo not found: Slurm is not installed here";
  auto r = run_command({"/bin/sh", "-c", "sinfo --Node --noheader --format='%N %t' 2>&1"});
  int usable = 0;
  for (const char* node : {"node1", "node2"})
    if (std::regex_search(r.out, std::regex(std::string(node) + " (idle|mix|alloc|comp)")))
      ++usable;
  if (r.exit_code != 0 || usable < 2)
    return "the local Slurm test cluster is not up (scripts/slurm-test-cluster.sh up); sinfo "
           "said: " +
           r.out;
  return "";
}

// The compare table's ratio for the job whose name contains `name_part`.
std::optional<double> Ratio(const std::string& table, const std::string& name_part) {
  const std::regex row(
      name_part + R"(\S*\s+SUCCEEDED\s+\d+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+([0-9.]+))");
  std::smatch m;
  if (!std::regex_search(table, m, row)) return std::nullopt;
  return std::stod(m[1].str());
}

// One row per job: EP overlap on (baseline), off, and on with delayed wgrad. Without overlap
// every all-to-all is exposed, so that variant is slower by what the emulated link predicts
// (about 1.3x here); the direction is asserted with a margin, not a time.
TEST(SlurmProbeOverlap, MoeAblationOnTwoNodesShowsTheExpertParallelOverlapGain) {
  const std::string skip = SkipReason();
  if (!skip.empty()) GTEST_SKIP() << skip;
  TempDir tmp;
  const std::map<std::string, std::string> env{{"BRIDGE_LAUNCH_STATE_DIR", tmp.path() + "/state"}};
  auto r = run_command({BRIDGE_LAUNCH_BIN, "ablate", "--executor", "slurm", "-ng", "16", "-gn", "8",
                        kRecipe, "executor.slurm.job_dir=" + tmp.path() + "/jobs", "--vary",
                        "comm_overlap.overlap_moe_expert_parallel_comm=false,true", "--vary",
                        "comm_overlap.delay_wgrad_compute=false,true", "--wait"},
                       env);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("ablate: 3 jobs (baseline + 2 variants)"));
  EXPECT_THAT(r.out, HasSubstr("steady-state step time, iterations 3-8"));
  const auto no_overlap =
      Ratio(r.out, "moe-probe-ep-overlap-overlap-moe-expert-parallel-comm-false");
  const auto delayed = Ratio(r.out, "moe-probe-ep-overlap-delay-wgrad-compute-true");
  ASSERT_TRUE(no_overlap && delayed) << r.out;
  EXPECT_GT(*no_overlap, 1.1) << "EP overlap off should be slower than the baseline:\n" << r.out;
  EXPECT_LT(*delayed, *no_overlap) << r.out;
}

}  // namespace
}  // namespace bridge
