// nsys and pytorch_profiler: runtime args, the per-rank nsys prefix, extra-arg merging.
#include <gtest/gtest.h>

#include "plugins/nsys_args.h"
#include "tests/support/plugin_testing.h"

namespace bridge {
namespace {

using testing::PluginHarness;
using Args = std::vector<std::string>;

std::string nsys_yaml(const std::string& extra = "") {
  return "plugins:\n  nsys: {profile_step_start: 10, profile_step_end: 12" + extra + "}\n";
}

TEST(PluginNsys, RuntimeArgs) {
  PluginHarness h(nsys_yaml(", profile_ranks: [0, 8], record_shapes: true"));
  h.topo = testing::make_topology("h100", 16);
  h.run();
  EXPECT_FALSE(h.diags.has_errors());
  EXPECT_EQ(h.args(), (Args{"profiling.use_nsys_profiler=true", "profiling.profile_step_start=10",
                            "profiling.profile_step_end=12", "profiling.profile_ranks=[0,8]",
                            "profiling.record_shapes=true"}));
}

TEST(PluginNsys, SlurmPrefixKeepsNsysPlaceholdersUnexpanded) {
  PluginHarness h(nsys_yaml());
  h.executor = "slurm";
  h.job_dir = "/lustre/jobs/t";
  h.run();
  EXPECT_EQ(h.out.executor.command_prefix,
            (Args{"nsys", "profile", "-s", "none", "-t", "nvtx,cuda", "-o",
                  "/lustre/jobs/t/profile_%p_%q{SLURM_JOB_ID}_node%q{SLURM_NODEID}_rank%q{"
                  "SLURM_PROCID}",
                  "--force-overwrite", "true", "--capture-range=cudaProfilerApi",
                  "--capture-range-end=stop"}));
  EXPECT_EQ(h.out.executor.command_prefix_source, "plugin:nsys");
  EXPECT_NE(h.out.executor.command_prefix_reason.find("nsys profile"), std::string::npos);
}

TEST(PluginNsys, LocalOutputNameUsesHostAndPid) {
  PluginHarness h(nsys_yaml(", nsys_trace: [cuda]"));
  h.run();
  const Args& p = h.out.executor.command_prefix;
  ASSERT_GE(p.size(), 8u);
  EXPECT_EQ(p[5], "cuda");
  EXPECT_EQ(p[7], "/jobs/t/profile_%h_%p");
}

TEST(PluginNsys, ExtraArgsReplaceDefaultsInBothForms) {
  PluginHarness h(nsys_yaml(
      ", nsys_extra_args: [\"--trace=cuda,nvtx,osrt\", \"-o\", \"/tmp/p\", \"--sample cpu\", "
      "\"--cuda-graph-trace=node\"]"));
  h.run();
  EXPECT_EQ(h.out.executor.command_prefix,
            (Args{"nsys", "profile", "--sample", "cpu", "--trace=cuda,nvtx,osrt", "-o", "/tmp/p",
                  "--force-overwrite", "true", "--capture-range=cudaProfilerApi",
                  "--capture-range-end=stop", "--cuda-graph-trace=node"}));
}

TEST(PluginNsys, MergeKeepsLongFormReplacementAndAppendsNewOptions) {
  Args defaults{"nsys", "profile", "--force-overwrite", "true", "--capture-range-end=stop"};
  EXPECT_EQ(merge_nsys_args(defaults, {"-f", "false", "--capture-range-end=repeat:2"}),
            (Args{"nsys", "profile", "-f", "false", "--capture-range-end=repeat:2"}));
  EXPECT_EQ(merge_nsys_args(defaults, {"--env-var=A=1", "--env-var=B=2"}),
            (Args{"nsys", "profile", "--force-overwrite", "true", "--capture-range-end=stop",
                  "--env-var=A=1", "--env-var=B=2"}));
}

TEST(PluginNsys, ExportSqlite) {
  EXPECT_EQ(add_sqlite_export({"nsys", "profile"}), (Args{"nsys", "profile", "--export=sqlite"}));
  EXPECT_EQ(add_sqlite_export({"nsys", "--export=text"}), (Args{"nsys", "--export=text,sqlite"}));
  EXPECT_EQ(add_sqlite_export({"nsys", "--export", "sqlite,text"}),
            (Args{"nsys", "--export", "sqlite,text"}));
  EXPECT_EQ(add_sqlite_export({"nsys", "--export=none"}), (Args{"nsys", "--export=sqlite"}));

  PluginHarness h(nsys_yaml(", export_sqlite: true"));
  h.run();
  EXPECT_EQ(h.out.executor.command_prefix.back(), "--export=sqlite");
}

TEST(PluginNsys, GpuMetricsOnlyOnLocalRankZeroDecidedAtRunTime) {
  PluginHarness h(nsys_yaml(", nsys_gpu_metrics: true"));
  h.executor = "slurm";
  h.job_dir = "/lustre/jobs/t";
  h.run();
  const Args& p = h.out.executor.command_prefix;
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0], "sh");
  EXPECT_EQ(p[1], "-c");
  EXPECT_EQ(p[3], "nsys");
  EXPECT_EQ(p[2],
            "if [ \"${LOCAL_RANK:-${SLURM_LOCALID:-0}}\" = 0 ]; then set -- "
            "--gpu-metrics-devices=all \"$@\"; fi; exec nsys profile -s none -t nvtx,cuda -o "
            "'/lustre/jobs/t/profile_%p_%q{SLURM_JOB_ID}_node%q{SLURM_NODEID}_rank%q{SLURM_"
            "PROCID}' --force-overwrite true --capture-range=cudaProfilerApi "
            "--capture-range-end=stop \"$@\"");
}

TEST(PluginNsys, MissingStepsAreErrors) {
  PluginHarness h("plugins:\n  nsys: {profile_step_end: 12}\n");
  h.run();
  const Diagnostic* d = h.diag("missing-option");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->path, "plugins.nsys.profile_step_start");
  EXPECT_EQ(d->loc.line, 3);
  EXPECT_TRUE(h.out.executor.command_prefix.empty());
}

TEST(PluginNsys, EndBeforeStartAndMissingRankAreErrors) {
  PluginHarness h(
      "plugins:\n  nsys: {profile_step_start: 12, profile_step_end: 12, "
      "profile_ranks: [0, 99]}\n");
  h.run();
  ASSERT_NE(h.diag("bad-value"), nullptr);
  EXPECT_EQ(h.diag("bad-value")->path, "plugins.nsys.profile_step_end");
  ASSERT_NE(h.diag("out-of-range"), nullptr);
  EXPECT_EQ(h.diag("out-of-range")->path, "plugins.nsys.profile_ranks");
}

TEST(PluginPytorchProfiler, ArgsWithDefaultSnapshotPath) {
  PluginHarness h("plugins:\n  pytorch_profiler: {profile_step_start: 5, profile_step_end: 6}\n");
  h.run();
  EXPECT_FALSE(h.diags.has_errors());
  EXPECT_EQ(h.args(), (Args{"profiling.use_pytorch_profiler=true", "profiling.profile_step_start=5",
                            "profiling.profile_step_end=6", "profiling.profile_ranks=[0]",
                            "profiling.record_shapes=false", "profiling.record_memory_history=true",
                            "profiling.memory_snapshot_path=/jobs/t/snapshot.pickle"}));
  EXPECT_TRUE(h.out.executor.command_prefix.empty());
}

TEST(PluginPytorchProfiler, NsysTogetherIsRejected) {
  PluginHarness h(
      "plugins:\n  pytorch_profiler: {profile_step_start: 5, profile_step_end: 6}\n"
      "  nsys: {profile_step_start: 5, profile_step_end: 6}\n");
  h.run();
  ASSERT_NE(h.diag("incompatible-plugins"), nullptr);
  EXPECT_EQ(h.diag("incompatible-plugins")->path, "plugins.nsys");
}

}  // namespace
}  // namespace bridge
