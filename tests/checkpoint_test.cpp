// Checkpoints (docs/long-jobs.md): the recipe's checkpoint section planned into the runtime's
// own keys by every Hydra-speaking adapter, the directories the plan refuses (relative,
// node-local on a multi-node job, not mounted into the container or the pods), bridge-probe's
// save and resume in Megatron's layout, and the newest checkpoint `status` shows.
#include "probe/checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "jobs/job_checkpoint.h"
#include "plan/plan.h"
#include "plan/runtime_adapter.h"
#include "tests/support/map_environment.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;
using ::testing::Not;

const char* kProbe = R"(name: ckpt
cluster: {num_gpus: 2, gpus_per_node: 2}
train: {global_batch_size: 2, micro_batch_size: 1, max_steps: 6}
checkpoint: {dir: /shared/ckpt, interval: 2, keep: 3, async: true}
runtime: {launcher: direct, command: [bridge-probe]}
)";

const char* kMegatronBridge = R"(name: mb
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
model: {family: llama, recipe: llama3_8b}
train: {task: pretrain}
checkpoint: {dir: /lustre/me/ckpt, interval: 500}
runtime: {adapter: megatron_bridge, command: [python, run_script.py]}
)";

Plan plan_of(const std::string& recipe, Diagnostics& diags, std::vector<std::string> overrides = {},
             const std::string& executor = "local") {
  MapEnvironment env(std::map<std::string, std::string>{{"HOME", "/home/alice"}});
  PlanRequest req;
  req.recipe_path = "ckpt.yaml";
  req.executor = executor;
  req.overrides = std::move(overrides);
  return build_plan_from_text(recipe, req, env, plugin_registry(), diags);
}

std::string codes(const Diagnostics& diags) {
  std::string out;
  for (const auto& d : diags.items()) out += d.code + " " + d.path + ": " + d.message + "\n";
  return out;
}

TEST(CheckpointPlan, TheProbeAndMegatronBridgeGetTheRuntimesOwnKeys) {
  Diagnostics diags;
  Plan probe = plan_of(kProbe, diags);
  ASSERT_TRUE(probe.complete) << codes(diags);
  EXPECT_THAT(runtime_argv(probe),
              IsSupersetOf({"checkpoint.save=/shared/ckpt", "checkpoint.load=/shared/ckpt",
                            "checkpoint.save_interval=2", "checkpoint.most_recent_k=3",
                            "checkpoint.async_save=true"}));
  Plan mb = plan_of(kMegatronBridge, diags, {}, "slurm");
  ASSERT_TRUE(mb.complete) << codes(diags);
  std::vector<std::string> argv = runtime_argv(mb);
  EXPECT_THAT(argv,
              IsSupersetOf({"checkpoint.save=/lustre/me/ckpt", "checkpoint.load=/lustre/me/ckpt",
                            "checkpoint.save_interval=500"}));
  // Unset keys stay the runtime's: no most_recent_k or async_save of ours.
  for (const std::string& word : argv) {
    EXPECT_THAT(word, Not(HasSubstr("most_recent_k")));
    EXPECT_THAT(word, Not(HasSubstr("async_save")));
  }
}

TEST(CheckpointPlan, WithoutACheckpointSectionNothingIsSent) {
  Diagnostics diags;
  Plan p = plan_of(kProbe, diags, {"checkpoint=null"});
  ASSERT_TRUE(p.complete) << codes(diags);
  for (const std::string& word : runtime_argv(p)) EXPECT_THAT(word, Not(HasSubstr("checkpoint")));
}

TEST(CheckpointPlan, TheNoneAdapterSaysTheCheckpointIsNotForwarded) {
  Diagnostics diags;
  Plan p = plan_of(kProbe, diags, {"runtime.adapter=none"});
  ASSERT_TRUE(p.complete) << codes(diags);
  const Diagnostic* d = test::find_diag(diags, "not-forwarded", "checkpoint");
  ASSERT_NE(d, nullptr) << codes(diags);
  EXPECT_THAT(d->message, HasSubstr("dir"));
}

TEST(CheckpointPlan, ARelativeOrIncompleteCheckpointIsRefused) {
  Diagnostics relative;
  plan_of(kProbe, relative, {"checkpoint.dir=ckpt"});
  EXPECT_NE(test::find_diag(relative, "checkpoint-dir-relative", "checkpoint.dir"), nullptr)
      << codes(relative);
  Diagnostics no_interval;
  plan_of(kProbe, no_interval, {"checkpoint.interval=null"});
  EXPECT_NE(test::find_diag(no_interval, "checkpoint-interval-missing", "checkpoint.interval"),
            nullptr)
      << codes(no_interval);
  Diagnostics no_dir;
  plan_of(kProbe, no_dir, {"checkpoint.dir=null"});
  EXPECT_NE(test::find_diag(no_dir, "checkpoint-dir-missing", "checkpoint.dir"), nullptr)
      << codes(no_dir);
}

// A multi-node job on node-local storage would split every checkpoint across its nodes; one
// node may use it.
TEST(CheckpointPlan, NodeLocalStorageIsRefusedOnlyForAMultiNodeJob) {
  Diagnostics two_nodes;
  plan_of(kProbe, two_nodes, {"checkpoint.dir=/tmp/ckpt", "cluster.gpus_per_node=1"}, "slurm");
  const Diagnostic* d = test::find_diag(two_nodes, "checkpoint-dir-node-local", "checkpoint.dir");
  ASSERT_NE(d, nullptr) << codes(two_nodes);
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_THAT(d->message, HasSubstr("2 nodes"));
  Diagnostics one_node;
  plan_of(kProbe, one_node, {"checkpoint.dir=/tmp/ckpt"}, "slurm");
  EXPECT_EQ(test::find_diag(one_node, "checkpoint-dir-node-local", "checkpoint.dir"), nullptr);
}

// What `validate` says for an executor whose ranks may not see the directory.
test::ChildResult validate(const std::string& recipe, const std::string& executor,
                           const std::vector<std::string>& overrides) {
  test::TempDir dir;
  std::string path = dir.write("ckpt.yaml", recipe);
  std::vector<std::string> argv{BRIDGE_LAUNCH_BIN, "validate", "--executor", executor, path};
  argv.insert(argv.end(), overrides.begin(), overrides.end());
  return test::run_command(argv, {{"BRIDGE_LAUNCH_STATE_DIR", dir.path() + "/state"}});
}

TEST(CheckpointPlan, AContainerOnSlurmMustMountTheDirectoryWritable) {
  const std::string image = "runtime.container_image=nvcr.io/nvidia/nemo:25.11";
  test::ChildResult bare = validate(kProbe, "slurm", {image});
  EXPECT_EQ(bare.exit_code, 2) << bare.err;
  EXPECT_THAT(bare.err, HasSubstr("checkpoint-dir-not-mounted"));
  test::ChildResult read_only = validate(
      kProbe, "slurm", {image, "executor.slurm.container_mounts=[/lustre/ckpt:/shared/ckpt:ro]"});
  EXPECT_EQ(read_only.exit_code, 2) << read_only.err;
  test::ChildResult mounted =
      validate(kProbe, "slurm", {image, "executor.slurm.container_mounts=[/lustre:/shared]"});
  EXPECT_EQ(mounted.exit_code, 0) << mounted.err;
  EXPECT_THAT(mounted.err, Not(HasSubstr("checkpoint-dir")));
  test::ChildResult no_container = validate(kProbe, "slurm", {});
  EXPECT_EQ(no_container.exit_code, 0) << no_container.err;
}

TEST(CheckpointPlan, APodMustHaveAWritableVolumeAtOrAboveTheDirectory) {
  const std::string image = "runtime.container_image=nvcr.io/nvidia/nemo:25.11";
  test::ChildResult bare = validate(kProbe, "kubernetes", {image});
  EXPECT_EQ(bare.exit_code, 2) << bare.err;
  EXPECT_THAT(bare.err, HasSubstr("checkpoint-dir-not-mounted"));
  test::ChildResult volume =
      validate(kProbe, "kubernetes",
               {image, "executor.kubernetes.volumes=[{name: ckpt, mount_path: /shared, pvc: c}]"});
  EXPECT_EQ(volume.exit_code, 0) << volume.err;
}

// bridge-probe's side: Megatron's layout, the tracker written last, the oldest pruned.
TEST(ProbeCheckpoint, SavesInMegatronsLayoutAndResumesFromTheTrackedIteration) {
  test::TempDir dir;
  probe::CheckpointSettings settings;
  settings.save = dir.path() + "/ckpt";
  settings.load = settings.save;
  settings.keep = 2;
  probe::Cluster one;  // world size 1: the barrier is local
  EXPECT_EQ(probe::newest_checkpoint(settings.load, 1).value(), 0);  // nothing saved yet
  for (int iteration : {2, 4, 6})
    ASSERT_TRUE(probe::save_checkpoint(settings, iteration, one).ok());
  EXPECT_TRUE(fs::exists(settings.save + "/iter_0000006/rank_00000"));
  EXPECT_FALSE(fs::exists(settings.save + "/iter_0000002")) << "keep 2 prunes the oldest";
  EXPECT_TRUE(fs::exists(settings.save + "/iter_0000004"));
  EXPECT_EQ(test::read_file(settings.save + "/latest_checkpointed_iteration.txt"), "6\n");
  EXPECT_EQ(probe::newest_checkpoint(settings.load, 1).value(), 6);
  // A checkpoint saved by another world size has no shard for every rank: refused.
  probe::ProbeResult<int> wider = probe::newest_checkpoint(settings.load, 2);
  ASSERT_FALSE(wider.ok());
  EXPECT_EQ(wider.status().exit_code(), probe::kExitUsage);
  EXPECT_THAT(wider.why(), HasSubstr("no shard of rank 1"));
  dir.write("ckpt/latest_checkpointed_iteration.txt", "six\n");
  EXPECT_FALSE(probe::newest_checkpoint(settings.load, 1).ok());
}

TEST(ProbeCheckpoint, SettingsComeFromMegatronBridgesKeys) {
  probe::Options o;
  o.runtime_overrides = {"checkpoint.save=/c", "checkpoint.load=/d", "checkpoint.save_interval=5",
                         "checkpoint.most_recent_k=null"};
  probe::ProbeResult<probe::CheckpointSettings> s = probe::checkpoint_settings(o);
  ASSERT_TRUE(s.ok()) << s.why();
  EXPECT_EQ(s->save, "/c");
  EXPECT_EQ(s->load, "/d");
  EXPECT_EQ(s->interval, 5);
  EXPECT_EQ(s->keep, -1);
  o.runtime_overrides = {"checkpoint.save_interval=0"};
  probe::ProbeResult<probe::CheckpointSettings> zero = probe::checkpoint_settings(o);
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.why(), HasSubstr("checkpoint.save_interval must be a whole number >= 1"));
}

// `status`: the tracker's iteration, else the newest iteration directory, else why none.
TEST(JobCheckpoint, StatusShowsTheNewestCheckpointOfTheJobsDirectory) {
  test::TempDir dir;
  JobRecord rec;
  EXPECT_FALSE(newest_checkpoint(rec).has_value()) << "no checkpoint.dir: no line";
  rec.knobs["checkpoint.dir"] = dir.path() + "/ckpt";
  std::optional<CheckpointState> missing = newest_checkpoint(rec);
  ASSERT_TRUE(missing.has_value());
  EXPECT_FALSE(missing->found);
  EXPECT_THAT(checkpoint_text(*missing), HasSubstr("not there (yet)"));
  fs::create_directories(dir.path() + "/ckpt/iter_0000300");
  fs::create_directories(dir.path() + "/ckpt/iter_0000200");
  std::optional<CheckpointState> by_dir = newest_checkpoint(rec);
  ASSERT_TRUE(by_dir && by_dir->found);
  EXPECT_EQ(by_dir->iteration, 300);
  EXPECT_THAT(checkpoint_text(*by_dir), HasSubstr("the newest iter_ directory"));
  dir.write("ckpt/latest_checkpointed_iteration.txt", "200\n");  // 300 is still being written
  std::optional<CheckpointState> tracked = newest_checkpoint(rec);
  ASSERT_TRUE(tracked && tracked->found);
  EXPECT_EQ(tracked->iteration, 200);
  EXPECT_EQ(tracked->source, "tracker");
  EXPECT_THAT(checkpoint_text(*tracked),
              AllOf(HasSubstr("iteration 200, saved "), HasSubstr("iter_0000200")));
  EXPECT_EQ(checkpoint_to_json(*tracked)["iteration"], 200);
}

// `why`: the iteration an attempt resumed from, in Megatron-Bridge's words or bridge-probe's.
TEST(JobCheckpoint, TheResumeLineOfMegatronBridgeAndOfTheProbeIsFound) {
  EXPECT_EQ(
      resumed_iteration_in("  successfully loaded checkpoint from /lustre/ckpt [ t 0/2, p 0/1 ] "
                           "at iteration 3000\n"),
      3000);
  EXPECT_EQ(resumed_iteration_in("bridge-probe: rank 0 resumes from checkpoint iteration 8 "
                                 "(/c/iter_0000008)\n"),
            8);
  EXPECT_EQ(resumed_iteration_in("bridge-probe: training: 12 steps\n"), std::nullopt);
}

}  // namespace
}  // namespace bridge
