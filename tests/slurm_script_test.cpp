// The Slurm executor's rendering: golden scripts (every one passes `bash -n`), the template
// engine, and a property test that runs rendered scripts with fake srun/scontrol and checks
// that every env value reaches every task byte-for-byte.
//
// Regenerate the goldens after an intended change:
//   UPDATE_GOLDENS=1 build/tests/unit_tests --gtest_filter='All/SlurmGolden*'
#include "executors/slurm_script.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "executors/executor.h"
#include "executors/rank_env.h"
#include "executors/slurm_template.h"
#include "plan/plan.h"
#include "system/host_env.h"
#include "tests/support/build_paths.h"
#include "tests/support/map_environment.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

namespace fs = std::filesystem;
using test::read_file;
using test::run_command;
using test::TempDir;

constexpr const char* kMarker = "MARKER-7f3c-secret-value-do-not-leak";

Plan make_plan(const std::string& recipe, Diagnostics& diags,
               std::map<std::string, std::string> host = {}, std::vector<std::string> cli_env = {},
               std::vector<std::string> overrides = {}) {
  host.emplace("HOME", "/home/alice");
  host.emplace("USER", "alice");
  MapEnvironment env(host);
  PlanRequest req;
  req.recipe_path = "golden.yaml";
  req.executor = "slurm";
  req.cli_env = std::move(cli_env);
  req.overrides = std::move(overrides);
  return build_plan_from_text(recipe, req, env, plugin_registry(), diags);
}

std::string diag_text(const Diagnostics& diags) {
  std::string out;
  for (const auto& d : diags.items()) out += format_diagnostic(d, false);
  return out;
}

std::string render(const Plan& plan, Diagnostics& diags,
                   const std::string& probe_dir = "/opt/bridge/bin") {
  SlurmRenderOptions options;
  options.probe_dir = probe_dir;
  auto script = render_sbatch_script(plan, options, diags);
  return script ? script->text : "";
}

std::string golden_path(const std::string& name) {
  return std::string(BRIDGE_SOURCE_DIR) + "/tests/golden/slurm/" + name + ".sbatch";
}

void expect_golden(const std::string& name, const std::string& text) {
  std::string path = golden_path(name);
  const char* update = std::getenv("UPDATE_GOLDENS");
  if (update && std::string(update) == "1") {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return;
  }
  ASSERT_TRUE(fs::exists(path)) << path << " is missing; run with UPDATE_GOLDENS=1";
  EXPECT_EQ(read_file(path), text)
      << "rendered script differs from " << path << " (UPDATE_GOLDENS=1 regenerates it)";
}

void expect_bash_syntax_ok(const std::string& text) {
  TempDir dir;
  std::string file = dir.write("job.sbatch", text);
  auto r = run_command({"/bin/bash", "-n", file});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

struct GoldenCase {
  const char* name;
  const char* recipe;
  std::map<std::string, std::string> host;
};

const char* kModel = R"(
model:
  tensor_model_parallel_size: 2
  pipeline_model_parallel_size: 1
  num_layers: 4
  hidden_size: 1024
  num_attention_heads: 8
  precision: bf16
)";

std::string recipe(const std::string& head, const std::string& tail) {
  return head + kModel + tail;
}

std::vector<GoldenCase> golden_cases() {
  return {
      {"srun",
       R"(name: llama-srun
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
)",
       {}},
      {"torchrun",
       R"(name: llama torchrun
cluster: {gpu: h100, num_gpus: 8, gpus_per_node: 4}
)",
       {}},
      {"container",
       R"(name: qwen-container
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
)",
       {{"WANDB_API_KEY", kMarker}, {"HF_SOURCE", kMarker}}},
      {"fault_tolerance",
       R"(name: ft
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
)",
       {}},
      {"preemption_dependency",
       R"(name: prod-run
cluster: {gpu: b200, num_gpus: 8, gpus_per_node: 8}
)",
       {}},
      {"setup_steps_nsys",
       R"(name: bench
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
)",
       {}},
      {"probe",
       R"(name: probe
cluster: {gpu: h100, num_gpus: 4, gpus_per_node: 2}
)",
       {}},
  };
}

// The part of each golden recipe after the model section.
std::string golden_tail(const std::string& name) {
  if (name == "srun")
    return R"(runtime:
  launcher: srun
  command: [python, /opt/Megatron-Bridge/scripts/performance/run_script.py]
  args: [-m, llama3 8b, --task, pretrain]
plugins:
  perf_env: {}
env:
  NCCL_DEBUG: WARN
  HOSTILE: "it's \"quoted\" $HOME `not run` $(nor this) \\ ; | & *\nsecond line ✓"
  SCRATCH: {value: "/scratch/$USER/run-$SLURM_JOB_ID", expand: true}
executor:
  slurm: {job_dir: /lustre/jobs, partition: batch, time: "00:30:00"}
)";
  if (name == "torchrun")
    return R"(runtime:
  launcher: torchrun
  command: [python, train.py]
  args: [--config, "my config.yaml"]
  workdir: /workspace/project
  pass_overrides: false
plugins:
  perf_env: {}
executor:
  slurm: {job_dir: /lustre/my jobs}
)";
  if (name == "container")
    return R"(runtime:
  command: [python, /opt/Megatron-Bridge/scripts/performance/run_script.py]
  container_image: nvcr.io/nvidia/nemo:25.11
plugins:
  perf_env: {}
  wandb: {project: overlap}
env:
  HF_TOKEN: {value: "${HF_SOURCE}", secret: true}
  NCCL_DEBUG: INFO
executor:
  slurm:
    job_dir: /lustre/jobs
    container_mounts: [/lustre:/lustre, "/home/alice/data:/data:ro"]
    container_workdir: /opt/Megatron-Bridge
)";
  if (name == "fault_tolerance")
    return R"(runtime:
  command: [python, pretrain.py]
  pass_overrides: false
plugins:
  fault_tolerance: {num_in_job_restarts: 2, num_job_retries_on_failure: 3}
executor:
  slurm: {job_dir: /lustre/jobs}
)";
  if (name == "preemption_dependency")
    return R"(runtime:
  command: [python, pretrain.py]
  pass_overrides: false
plugins:
  preemption: {preempt_time: 120}
executor:
  slurm:
    job_dir: /lustre/jobs
    account: my-account
    partition: batch
    qos: high
    time: "04:00:00"
    mem: "0"
    exclusive: true
    dependency: afterok:12345
    retries: 1
    sbatch_args: [--constraint=gpu80, --mail-type=END, --reservation=bench]
    srun_args: [--cpus-per-task=16, --mpi=pmix, "--container-env=A B"]
)";
  if (name == "setup_steps_nsys")
    return R"(runtime:
  command: [python, pretrain.py]
  pass_overrides: false
plugins:
  perf_env: {enable_vboost: true, lock_gpu_freq: 1980}
  nsys: {profile_step_start: 5, profile_step_end: 6, nsys_gpu_metrics: true}
executor:
  slurm: {job_dir: /lustre/jobs}
)";
  return R"(runtime:
  command: [bridge-probe]
  args: [--steps, "4"]
  pass_overrides: false
executor:
  slurm: {job_dir: /tmp/probe-jobs}
)";
}

class SlurmGolden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(SlurmGolden, MatchesGoldenAndIsValidBash) {
  const GoldenCase& c = GetParam();
  Diagnostics diags;
  Plan plan = make_plan(recipe(c.recipe, golden_tail(c.name)), diags, c.host);
  ASSERT_TRUE(plan.complete) << diag_text(diags);
  std::string text = render(plan, diags);
  ASSERT_FALSE(diags.has_errors()) << diag_text(diags);
  expect_golden(c.name, text);
  expect_bash_syntax_ok(text);
  EXPECT_EQ(text.find(kMarker), std::string::npos) << "a secret value leaked into the script";
}

INSTANTIATE_TEST_SUITE_P(All, SlurmGolden, ::testing::ValuesIn(golden_cases()),
                         [](const auto& p) { return std::string(p.param.name); });

// Properties of specific goldens, so a regenerated golden cannot silently lose them.
class SlurmRender : public ::testing::Test {
 protected:
  std::string render_case(const std::string& name, std::map<std::string, std::string> host = {}) {
    for (const auto& c : golden_cases()) {
      if (c.name != name) continue;
      for (auto& kv : c.host) host.insert(kv);
      Plan plan = make_plan(recipe(c.recipe, golden_tail(name)), diags, host);
      EXPECT_TRUE(plan.complete) << diag_text(diags);
      return render(plan, diags);
    }
    ADD_FAILURE() << "no case " << name;
    return "";
  }
  Diagnostics diags;
};

bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST_F(SlurmRender, SrunModeMapsRanksPerTask) {
  std::string s = render_case("srun");
  EXPECT_TRUE(contains(s, "#SBATCH --ntasks-per-node=8\n"));
  EXPECT_TRUE(contains(s, "#SBATCH --gpus-per-node=8\n"));
  EXPECT_TRUE(
      contains(s, "#SBATCH --output=/lustre/jobs/llama-srun/llama-srun-dry-run/slurm-%j.out\n"));
  EXPECT_TRUE(contains(s, "--kill-on-bad-exit=1"));
  EXPECT_TRUE(contains(s, "--wait=60"));
  // Single-quoted, so the batch shell does not expand the rank variables: each task does.
  EXPECT_TRUE(contains(s,
                       "bash -c 'export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID "
                       "WORLD_SIZE=$SLURM_NTASKS LOCAL_WORLD_SIZE=8 NODE_RANK=$SLURM_NODEID"));
  EXPECT_TRUE(contains(s, "export NCCL_DEBUG='WARN'\n"));
  EXPECT_TRUE(contains(s, "export HOSTILE='it'\\''s \"quoted\" $HOME"));
  // expand: true is expanded per task, double-quoted.
  EXPECT_TRUE(contains(s, "export SCRATCH=\"/scratch/$USER/run-$SLURM_JOB_ID\"; "));
  EXPECT_TRUE(contains(s, "'llama3 8b'"));
  EXPECT_FALSE(contains(s, "--requeue"));
  EXPECT_FALSE(contains(s, "#SBATCH --signal"));
  EXPECT_FALSE(contains(s, "--container"));
}

TEST_F(SlurmRender, TorchrunModeOneTaskPerNode) {
  std::string s = render_case("torchrun");
  EXPECT_TRUE(contains(s, "#SBATCH --job-name=llama_torchrun\n"));
  EXPECT_TRUE(contains(s, "#SBATCH --ntasks-per-node=1\n"));
  EXPECT_TRUE(contains(s, "#SBATCH --gpus-per-node=4\n"));
  EXPECT_TRUE(contains(
      s,
      "#SBATCH --output=\"/lustre/my jobs/llama torchrun/llama_torchrun-dry-run/slurm-%j.out\"\n"));
  EXPECT_TRUE(contains(s, "--cpu-bind=none"));
  EXPECT_TRUE(contains(s,
                       "exec torchrun --nnodes=2 --nproc-per-node=4 "
                       "--node-rank=\"$SLURM_NODEID\" --master-addr=\"$MASTER_ADDR\" "
                       "--master-port=\"$MASTER_PORT\" --no-python bash -c "));
  // h100: each worker is bound to its GPU's NUMA node (local rank / 4) before the command.
  EXPECT_TRUE(contains(s, "n=$((LOCAL_RANK / 4))"));
  EXPECT_TRUE(contains(s, " bridge-worker \"$@\"' \\\n  bridge-node "));
  EXPECT_TRUE(contains(s, "--chdir=/workspace/project"));
  EXPECT_TRUE(contains(s, "'my config.yaml'"));
}

TEST_F(SlurmRender, ContainerListsEveryLaunchVariable) {
  std::string s = render_case("container");
  EXPECT_TRUE(contains(s, "--container-image=nvcr.io/nvidia/nemo:25.11"));
  EXPECT_TRUE(contains(s,
                       "--container-mounts=/lustre:/lustre,/home/alice/data:/data:ro,"
                       "/lustre/jobs/qwen-container:/lustre/jobs/qwen-container"));
  EXPECT_TRUE(contains(s, "--container-workdir=/opt/Megatron-Bridge"));
  size_t at = s.find("--container-env=");
  ASSERT_NE(at, std::string::npos);
  std::string list = s.substr(at, s.find(' ', at) - at);
  Plan plan = make_plan(recipe(golden_cases()[2].recipe, golden_tail("container")), diags,
                        golden_cases()[2].host);
  for (const auto& v : plan.env.vars)
    EXPECT_TRUE(contains(list + ",", "," + v.name + ",") || contains(list, "=" + v.name + ","))
        << v.name << " missing from " << list;
  for (const char* name : {"WANDB_API_KEY", "HF_TOKEN", "BRIDGE_EXPECTED_ENV", "MASTER_ADDR",
                           "MASTER_PORT", "CUDA_DEVICE_MAX_CONNECTIONS"})
    EXPECT_TRUE(contains(list, name)) << name;
  EXPECT_TRUE(contains(s, "#SBATCH --export=ALL,WANDB_API_KEY,HF_TOKEN\n"));
  EXPECT_FALSE(contains(s, kMarker));
  EXPECT_FALSE(contains(s, "export WANDB_API_KEY="));
}

TEST_F(SlurmRender, FaultToleranceRequeuesAndUsesFtLauncherPerNode) {
  std::string s = render_case("fault_tolerance");
  EXPECT_TRUE(contains(s, "#SBATCH --requeue\n"));
  EXPECT_TRUE(contains(s, "#SBATCH --ntasks-per-node=1\n"));
  EXPECT_TRUE(contains(s, "exec ft_launcher --max-restarts=2"));
  EXPECT_TRUE(contains(s, "[ \"$counted\" -gt 3 ]"));
  EXPECT_TRUE(contains(s, "sbatch --parsable ${exclude:+\"--exclude=$exclude\"}"));
}

TEST_F(SlurmRender, PreemptionDependencyAndRawArgs) {
  std::string s = render_case("preemption_dependency");
  for (const char* line :
       {"#SBATCH --signal=TERM@120\n", "#SBATCH --dependency=afterok:12345\n",
        "#SBATCH --account=my-account\n", "#SBATCH --partition=batch\n", "#SBATCH --qos=high\n",
        "#SBATCH --time=04:00:00\n", "#SBATCH --mem=0\n", "#SBATCH --exclusive\n",
        "#SBATCH --requeue\n", "#SBATCH --constraint=gpu80\n", "#SBATCH --mail-type=END\n",
        "#SBATCH --open-mode=append\n"})
    EXPECT_TRUE(contains(s, line)) << line;
  EXPECT_TRUE(contains(s, "[ \"$BRIDGE_ATTEMPT\" -gt 1 ]"));
}

TEST_F(SlurmRender, SetupStepsRunOncePerNodeAndNsysNamesStayUnexpanded) {
  std::string s = render_case("setup_steps_nsys");
  EXPECT_TRUE(contains(s,
                       "--ntasks-per-node=1 \\\n  --kill-on-bad-exit=1 "
                       "--output=\"$BRIDGE_JOB_DIR/setup1-node%n.log\""));
  EXPECT_TRUE(contains(s, "bash -c 'sudo nvidia-smi boost-slider --vboost 1"));
  EXPECT_TRUE(contains(s, "bash -c 'sudo nvidia-smi -lgc 1980'"));
  // Quoted in the batch script and quoted again in the task: nsys sees %q{...} literally.
  EXPECT_TRUE(contains(s, "%q{SLURM_JOB_ID}_node%q{SLURM_NODEID}_rank%q{SLURM_PROCID}"));
}

TEST_F(SlurmRender, ProbeRunsFromTheProbeDir) {
  std::string s = render_case("probe");
  EXPECT_TRUE(contains(s, "bridge-rank /opt/bridge/bin/bridge-probe --steps 4"));
}

TEST_F(SlurmRender, NoProbeDirLeavesTheNameToPath) {
  Plan plan = make_plan(recipe(golden_cases()[6].recipe, golden_tail("probe")), diags);
  std::string s = render(plan, diags, "");
  EXPECT_TRUE(contains(s, "bridge-rank bridge-probe --steps 4"));
}

TEST_F(SlurmRender, IsDeterministic) {
  EXPECT_EQ(render_case("container"), render_case("container"));
}

TEST_F(SlurmRender, CliSecretEnvIsNeverRendered) {
  Plan plan = make_plan(recipe(golden_cases()[0].recipe, golden_tail("srun")), diags,
                        {{"TOKEN_SRC", kMarker}});
  ASSERT_TRUE(plan.complete) << diag_text(diags);
  EnvVar v;
  v.name = "MY_TOKEN";
  v.value = kMarker;
  v.secret = true;
  plan.env.vars.push_back(v);
  std::string s = render(plan, diags);
  EXPECT_FALSE(contains(s, kMarker));
  EXPECT_TRUE(contains(s, "#SBATCH --export=ALL,MY_TOKEN\n"));
  EXPECT_TRUE(contains(s, "[ -n \"${MY_TOKEN+set}\" ] ||"));
  EXPECT_TRUE(contains(s, "MY_TOKEN?"));  // BRIDGE_EXPECTED_ENV checks presence only
}

TEST_F(SlurmRender, SrunArgsAreQuotedAfterTheGeneratedOptionsAndCannotChangeTheLayout) {
  Plan plan = make_plan(recipe(golden_cases()[0].recipe, golden_tail("srun")), diags, {}, {},
                        {"executor.slurm.srun_args=[--cpu-bind=none, \"--comment=it's x\"]"});
  ASSERT_TRUE(plan.complete) << diag_text(diags);
  std::string s = render(plan, diags);
  EXPECT_TRUE(contains(s,
                       "  --output=\"$BRIDGE_JOB_DIR/rank%t.log\" \\\n  --cpu-bind=none \\\n"
                       "  '--comment=it'\\''s x' \\\n"))
      << s;
  for (const char* bad : {"--ntasks-per-node=4", "--output=x.log", "-N2", "--distribution=cyclic",
                          "cpu-bind", "--a\tb"}) {
    Diagnostics d;
    Plan p = make_plan(recipe(golden_cases()[0].recipe, golden_tail("srun")), d, {}, {},
                       {std::string("executor.slurm.srun_args=[\"") + bad + "\"]"});
    ASSERT_TRUE(p.complete) << bad << diag_text(d);
    EXPECT_EQ(render(p, d), "") << bad;
    EXPECT_TRUE(d.has_code("slurm-srun-arg-contradicts-plan") || d.has_code("slurm-bad-srun-arg"))
        << bad << diag_text(d);
  }
}

// Issue 47 item 13: srun gets each srun_args entry as one word, so a second option inside
// one ("--cpu-bind=none --nodes=9") passed validate and failed in srun after the queue wait.
TEST_F(SlurmRender, AnSrunArgsEntryHoldingASecondOptionIsRefused) {
  for (auto [bad, code] : std::vector<std::pair<const char*, const char*>>{
           {"--cpu-bind=none --nodes=9", "slurm-srun-arg-contradicts-plan"},
           {"--cpu-bind=none  -N9", "slurm-srun-arg-contradicts-plan"},
           {"--cpu-bind=none --ntasks=3", "slurm-srun-arg-contradicts-plan"},
           {"--exclusive --mem=0", "slurm-bad-srun-arg"},
           {"--cpu-bind=none -l", "slurm-bad-srun-arg"}}) {
    Diagnostics d;
    Plan p = make_plan(recipe(golden_cases()[0].recipe, golden_tail("srun")), d, {}, {},
                       {std::string("executor.slurm.srun_args=[\"") + bad + "\"]"});
    ASSERT_TRUE(p.complete) << bad << diag_text(d);
    EXPECT_EQ(render(p, d), "") << bad;
    EXPECT_TRUE(d.has_code(code)) << bad << diag_text(d);
    EXPECT_THAT(diag_text(d), ::testing::HasSubstr("holds a second option")) << bad;
  }
  // A blank inside a value, not followed by an option, stays the user's choice.
  for (const char* fine : {"--comment=two words", "--job-name=a b c"}) {
    Diagnostics d;
    Plan p = make_plan(recipe(golden_cases()[0].recipe, golden_tail("srun")), d, {}, {},
                       {std::string("executor.slurm.srun_args=[\"") + fine + "\"]"});
    ASSERT_TRUE(p.complete) << fine << diag_text(d);
    EXPECT_NE(render(p, d), "") << fine << diag_text(d);
  }
}

// A multi-node job dir on node-local storage splits the job's logs across its nodes: a warning
// that names the dir and the fix (it was accepted silently; issue 47). A single node, a shared
// path, and a path that only starts with the same letters are fine.
TEST_F(SlurmRender, AMultiNodeJobDirOnNodeLocalStorageIsWarned) {
  auto warned = [](const std::string& dir, int case_index) {
    Diagnostics d;
    const GoldenCase c = golden_cases()[static_cast<size_t>(case_index)];
    Plan p = make_plan(recipe(c.recipe, golden_tail(c.name)), d, c.host, {},
                       {"executor.slurm.job_dir=" + dir});
    EXPECT_TRUE(p.complete) << diag_text(d);
    EXPECT_NE(render(p, d), "") << diag_text(d);
    const Diagnostic* w = test::find_diag(d, "slurm-node-local-job-dir", "executor.slurm.job_dir");
    if (w) {
      EXPECT_EQ(w->severity, Severity::kWarning);
      EXPECT_THAT(w->message, ::testing::HasSubstr("`" + dir + "`"));
      EXPECT_THAT(w->message, ::testing::HasSubstr("2 nodes"));
      EXPECT_THAT(w->help, ::testing::HasSubstr("shared file system"));
    }
    return w != nullptr;
  };
  EXPECT_TRUE(warned("/tmp/jobs", 0));  // 16 GPUs on 2 nodes
  EXPECT_TRUE(warned("/dev/shm/jobs", 0));
  EXPECT_TRUE(warned("/var/tmp", 0));
  EXPECT_FALSE(warned("/lustre/jobs", 0));
  EXPECT_FALSE(warned("/tmpfs-shared/jobs", 0));
  EXPECT_FALSE(warned("/tmp/jobs", 4));  // 8 GPUs on one node
}

TEST_F(SlurmRender, BadValuesAreDiagnosed) {
  Plan plan = make_plan(recipe(golden_cases()[0].recipe, golden_tail("srun")), diags, {}, {},
                        {"executor.slurm.sbatch_args=[constraint]"});
  ASSERT_TRUE(plan.complete) << diag_text(diags);
  EXPECT_EQ(render(plan, diags), "");
  EXPECT_TRUE(diags.has_code("slurm-bad-sbatch-arg")) << diag_text(diags);

  // The comment is the registry id bridge-launch finds its job by: a second one would win.
  for (const char* comment : {"--comment=nightly", "--comment", "--comment nightly", "--comm=x"}) {
    Diagnostics d;
    Plan p = make_plan(recipe(golden_cases()[0].recipe, golden_tail("srun")), d, {}, {},
                       {std::string("executor.slurm.sbatch_args=[\"") + comment + "\"]"});
    ASSERT_TRUE(p.complete) << diag_text(d);
    EXPECT_EQ(render(p, d), "") << comment;
    EXPECT_TRUE(d.has_code("slurm-sbatch-arg-contradicts-plan")) << comment << diag_text(d);
  }

  Diagnostics d2;
  Plan p2 = make_plan(recipe(golden_cases()[2].recipe, golden_tail("container")), d2,
                      golden_cases()[2].host, {}, {"executor.slurm.container_mounts=[\"a,b:/c\"]"});
  ASSERT_TRUE(p2.complete) << diag_text(d2);
  EXPECT_EQ(render(p2, d2), "");
  EXPECT_TRUE(d2.has_code("slurm-bad-mount")) << diag_text(d2);
}

// sbatch reads every option of an #SBATCH line, so a blank inside one sbatch_args entry must
// not smuggle a second option past the guard (issue: "--nodes 9" and "--x --nodes=9" used to
// pass and override the validated layout or the job's comment). srun gets each srun_args
// entry as one word, in which a cluster of short flags (`-lN9`) still sets -N.
TEST_F(SlurmRender, ABlankOrAFlagClusterCannotSmuggleAnOptionPastTheGuard) {
  for (const char* bad :
       {"--nodes 9", "--x --nodes=9", "-Jx --nodes=5", "--exclusive --gres=gpu:8",
        "--reservation=r --comment=bridge-launch:evil", "-HN3", "--reservation='a b' -n 4"}) {
    Diagnostics d;
    Plan p = make_plan(recipe(golden_cases()[0].recipe, golden_tail("srun")), d, {}, {},
                       {std::string("executor.slurm.sbatch_args=[\"") + bad + "\"]"});
    ASSERT_TRUE(p.complete) << bad << diag_text(d);
    EXPECT_EQ(render(p, d), "") << bad;
    EXPECT_TRUE(d.has_code("slurm-sbatch-arg-contradicts-plan")) << bad << diag_text(d);
  }
  for (const char* bad : {"-lN9", "-ulN2", "-lK"}) {
    Diagnostics d;
    Plan p = make_plan(recipe(golden_cases()[0].recipe, golden_tail("srun")), d, {}, {},
                       {std::string("executor.slurm.srun_args=[\"") + bad + "\"]"});
    ASSERT_TRUE(p.complete) << bad << diag_text(d);
    EXPECT_EQ(render(p, d), "") << bad;
    EXPECT_TRUE(d.has_code("slurm-srun-arg-contradicts-plan")) << bad << diag_text(d);
  }
  // Options that only look alike stay allowed: a job name with an N in it, a quoted blank.
  for (const char* fine : {"-JNightly", "--constraint=h100", "--reservation='a b'"}) {
    Diagnostics d;
    Plan p = make_plan(recipe(golden_cases()[0].recipe, golden_tail("srun")), d, {}, {},
                       {std::string("executor.slurm.sbatch_args=[\"") + fine + "\"]"});
    ASSERT_TRUE(p.complete) << fine << diag_text(d);
    EXPECT_NE(render(p, d), "") << fine << diag_text(d);
  }
}

TEST_F(SlurmRender, UserTemplateOverride) {
  TempDir dir;
  std::string path = dir.write("my.mustache",
                               "#!/bin/bash\n#SBATCH --job-name={{job_name}}\n"
                               "{{#exports}}\nexport {{name}}={{value_q}}\n{{/exports}}\n"
                               "srun {{task_command}}\n");
  Plan plan = make_plan(recipe(golden_cases()[0].recipe, golden_tail("srun")), diags, {}, {},
                        {"executor.slurm.template=" + path});
  ASSERT_TRUE(plan.complete) << diag_text(diags);
  std::string s = render(plan, diags);
  EXPECT_EQ(s.rfind("#!/bin/bash\n#SBATCH --job-name=llama-srun\nexport ", 0), 0u) << s;

  Diagnostics d2;
  std::string bad = dir.write("bad.mustache", "#!/bin/bash\n{{nmae}}\n");
  Plan p2 = make_plan(recipe(golden_cases()[0].recipe, golden_tail("srun")), d2, {}, {},
                      {"executor.slurm.template=" + bad});
  EXPECT_EQ(render(p2, d2), "");
  EXPECT_TRUE(d2.has_code("template-render")) << diag_text(d2);
}

// --template must name a bounded regular file: a directory once rendered an empty script,
// and /dev/zero or a FIFO would have hung the launcher.
TEST_F(SlurmRender, TemplateThatIsNotABoundedRegularFileIsRefused) {
  TempDir dir;
  std::string fifo = dir.path() + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::string big = dir.write("big.mustache", std::string((1 << 20) + 1, '#'));
  struct Case {
    std::string path, why;
  };
  for (const Case& c :
       {Case{dir.path(), "it is a directory"}, Case{"/dev/zero", "not a regular file"},
        Case{fifo, "not a regular file"}, Case{big, "templates are limited to 1048576 bytes"},
        Case{dir.path() + "/missing.mustache", "No such file"}}) {
    Diagnostics d;
    Plan p = make_plan(recipe(golden_cases()[0].recipe, golden_tail("srun")), d, {}, {},
                       {"executor.slurm.template=" + c.path});
    ASSERT_TRUE(p.complete) << diag_text(d);
    EXPECT_EQ(render(p, d), "") << c.path;
    EXPECT_TRUE(d.has_code("template-unreadable")) << c.path << "\n" << diag_text(d);
    EXPECT_NE(diag_text(d).find(c.why), std::string::npos) << c.path << "\n" << diag_text(d);
  }
}

TEST(SlurmNames, JobNameAndShellWord) {
  EXPECT_EQ(slurm_job_name("llama 70b/run#1"), "llama_70b_run_1");
  EXPECT_EQ(slurm_job_name(""), "bridge-job");
  EXPECT_EQ(shell_word("--steps=4"), "--steps=4");
  EXPECT_EQ(shell_word("a b"), "'a b'");
  EXPECT_EQ(shell_word(""), "''");
  EXPECT_EQ(shell_word("it's"), "'it'\\''s'");
  EXPECT_EQ(slurm_master_port(123), 20123);
  EXPECT_EQ(slurm_master_port(10000), 20000);
}

// ---- the template engine -------------------------------------------------------------

std::string tmpl(const std::string& text, const TemplateData& data, Diagnostics& diags) {
  return render_template(text, data, "test", diags).value_or("<error>");
}

// 50 000 nested sections overflowed the stack (rendering recurses per level): nesting is
// bounded at parse time, with an error naming the line.
// Found by fuzz_slurm_template: nested list sections multiply (3 items, 22 levels: 3^22
// passes); the renderer stops with an error instead of hanging. And tag names are quoted
// escaped in messages (a tag may hold any bytes).
TEST(SlurmTemplate, ListBombsStopAndTagNamesAreEscapedInErrors) {
  TemplateData d;
  for (const char* item : {"a", "b", "c"}) d.add_text_item("xs", item);
  std::string bomb;
  for (int i = 0; i < 22; ++i) bomb += "{{#xs}}";
  bomb += "{{.}}";
  for (int i = 0; i < 22; ++i) bomb += "{{/xs}}";
  Diagnostics diags;
  EXPECT_EQ(tmpl(bomb, d, diags), "<error>");
  EXPECT_TRUE(diags.has_code("template-render"));
  EXPECT_NE(diags.items().back().message.find("more than 1000000 steps"), std::string::npos);
  Diagnostics raw;
  EXPECT_EQ(tmpl("{{bad\x1b[31m\xff}}", d, raw), "<error>");
  EXPECT_NE(raw.items().back().message.find("bad\\x1b[31m\\xff"), std::string::npos)
      << raw.items().back().message;
}

TEST(SlurmTemplate, DeeplyNestedSectionsAreAnErrorNotACrash) {
  TemplateData d;
  d.set_bool("a", true);
  std::string deep;
  for (int i = 0; i < 50000; ++i) deep += "{{#a}}";
  for (int i = 0; i < 50000; ++i) deep += "{{/a}}";
  Diagnostics diags;
  EXPECT_EQ(tmpl(deep, d, diags), "<error>");
  EXPECT_TRUE(diags.has_code("template-syntax"));
  EXPECT_NE(diags.items().back().message.find("nested deeper than 64"), std::string::npos);
  Diagnostics fine;
  EXPECT_EQ(tmpl("{{#a}}{{#a}}x{{/a}}{{/a}}", d, fine), "x");
}

TEST(SlurmTemplate, VariablesSectionsAndStandaloneLines) {
  TemplateData d;
  d.set("name", "job");
  d.set_bool("yes", true);
  d.set_bool("no", false);
  d.add_text_item("items", "a");
  d.add_text_item("items", "b");
  TemplateData row;
  row.set("k", "v1");
  d.add_item("rows", row);
  d.ensure_list("empty");
  Diagnostics diags;
  EXPECT_EQ(tmpl("x={{name}} {{ name }}\n", d, diags), "x=job job\n");
  EXPECT_EQ(tmpl("{{#items}}\n- {{.}}\n{{/items}}\nend\n", d, diags), "- a\n- b\nend\n");
  EXPECT_EQ(tmpl("  {{#yes}}\nY\n  {{/yes}}\n{{#no}}\nN\n{{/no}}\n", d, diags), "Y\n");
  EXPECT_EQ(tmpl("{{^empty}}none{{/empty}}{{^items}}X{{/items}}", d, diags), "none");
  EXPECT_EQ(tmpl("{{#rows}}{{k}}/{{name}}{{/rows}}", d, diags), "v1/job");
  EXPECT_EQ(tmpl("{{! a comment }}\nkept\n", d, diags), "kept\n");
  EXPECT_EQ(tmpl("${x} $((1 + 2)) ${y%%z} {not a tag}", d, diags),
            "${x} $((1 + 2)) ${y%%z} {not a tag}");
  EXPECT_FALSE(diags.has_errors());
}

TEST(SlurmTemplate, ErrorsNameTheLine) {
  TemplateData d;
  d.ensure_list("items");
  for (const char* bad : {"a\n{{#items}}\n", "a\n{{/items}}\n", "{{#items}}{{/other}}", "{{{raw}}}",
                          "{{> partial}}", "{{unknown}}", "{{items}}", "{{x"}) {
    Diagnostics diags;
    EXPECT_EQ(tmpl(bad, d, diags), "<error>") << bad;
    ASSERT_TRUE(diags.has_errors()) << bad;
    EXPECT_NE(diags.items()[0].message.find("line"), std::string::npos);
  }
}

// The line a message names is counted from the template's line breaks, tag after tag: the
// count resumes where the previous tag left it, across blank lines, text and sections.
TEST(SlurmTemplate, ErrorsNameTheLineTheTagIsOn) {
  TemplateData d;
  d.set("name", "job");
  d.set_bool("yes", true);
  const std::pair<std::string, std::string> cases[] = {
      {"{{name}}\n\n{{name}} x\n{{#yes}}\n{{unknown}}\n{{/yes}}\n", "template test line 5: "},
      {"a\nb\n\n{{#yes}}\n\n\n", "template test line 4: "},
      {"{{name}}{{name}}\n{{name}}\n\n\n{{/yes}}", "template test line 5: "},
      {"{{#yes}}{{/yes}}\n{{#yes}}\n{{/no}}\n", "template test line 3: "},
  };
  for (const auto& [text, line] : cases) {
    Diagnostics diags;
    EXPECT_EQ(tmpl(text, d, diags), "<error>") << text;
    ASSERT_TRUE(diags.has_errors()) << text;
    EXPECT_EQ(diags.items()[0].message.rfind(line, 0), 0u) << diags.items()[0].message;
  }
}

// A lazy value costs nothing where the template does not use it (the retry program of a job
// without retries), is the same text as set() where it does (as a variable, as a section's
// truth, inside a section), and is computed once per rendering however often it is used.
TEST(SlurmTemplate, LazyValuesAreComputedOnlyWhereUsed) {
  int made = 0;
  TemplateData d;
  d.set_bool("on", true);
  d.set_bool("off", false);
  d.set_lazy("program", [&made] {
    ++made;
    return std::string("awk 'x'");
  });
  d.set_lazy("nothing", [&made] {
    ++made;
    return std::string();
  });
  Diagnostics diags;
  EXPECT_EQ(tmpl("a{{#off}}{{program}}{{/off}}b\n", d, diags), "ab\n");
  EXPECT_EQ(made, 0);
  EXPECT_EQ(tmpl("{{#on}}[{{program}}]{{/on}}", d, diags), "[awk 'x']");
  EXPECT_EQ(made, 1);
  EXPECT_EQ(tmpl("{{#program}}set{{/program}}{{^nothing}}, empty{{/nothing}}", d, diags),
            "set, empty");
  EXPECT_EQ(made, 3);
  // Tested, printed and printed again in one rendering, inside a list section: made once.
  d.add_text_item("xs", "a");
  d.add_text_item("xs", "b");
  EXPECT_EQ(tmpl("{{#xs}}{{#program}}{{program}}|{{/program}}{{/xs}}{{program}}", d, diags),
            "awk 'x'|awk 'x'|awk 'x'");
  EXPECT_EQ(made, 4);
  EXPECT_FALSE(diags.has_errors());
}

// ---- property test: values survive the script byte-for-byte -----------------------------

// Fake Slurm commands for running a rendered script outside Slurm: srun runs the command
// once per task (FAKE_SRUN_TASKS) with the SLURM_* task variables, writing each task's
// `env -0` to $FAKE_OUT/task<N>.
void write_fakes(const std::string& bin) {
  fs::create_directories(bin);
  std::ofstream(bin + "/srun") << R"(#!/bin/bash
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
n=${FAKE_SRUN_TASKS:-1}
for ((i = 0; i < n; i++)); do
  SLURM_PROCID=$i SLURM_LOCALID=$i SLURM_NTASKS=$n SLURM_NODEID=0 \
    "$@" > "$FAKE_OUT/task$i" || exit $?
done
)";
  std::ofstream(bin + "/scontrol") << R"(#!/bin/bash
if [ "$1 $2" = "show hostnames" ]; then printf 'nodeA\nnodeB\n'; fi
)";
  for (const char* f : {"srun", "scontrol"}) chmod((bin + "/" + f).c_str(), 0755);
}

std::map<std::string, std::string> parse_env0(const std::string& text) {
  std::map<std::string, std::string> env;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    std::string entry = text.substr(start, end - start);
    size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
    start = end + 1;
  }
  return env;
}

std::string random_value(std::mt19937& rng) {
  static const std::vector<std::string> kPieces{
      "'", "\"", "$",     "`",    "\\",    "\n",  "\t",   " ",    "!",  "*",    "?", "[",
      "]", "{",  "}",     "~",    "#",     ";",   "&",    "|",    "<",  ">",    "(", ")",
      "%", "\r", "'\\''", "$(",   "${",    "$((", "ü",    "日本", "🚀",  "\xff", "a", "Z9",
      "=", ",",  "$HOME", "`id`", "$(id)", "''",  "\"\"", "\\n",  "-n", "-e"};
  std::uniform_int_distribution<size_t> len(0, 12), pick(0, kPieces.size() - 1);
  std::string v;
  for (size_t i = len(rng); i > 0; --i) v += kPieces[pick(rng)];
  return v;
}

TEST(SlurmProperty, EnvValuesReachEveryTaskByteForByte) {
  unsigned seed = 20261129;
  if (const char* s = std::getenv("SLURM_PROPERTY_SEED"))
    seed = static_cast<unsigned>(std::stoul(s));
  std::mt19937 rng(seed);
  TempDir dir;
  write_fakes(dir.path() + "/bin");
  Diagnostics base_diags;
  Plan base = make_plan(recipe(R"(name: prop
cluster: {gpu: h100, num_gpus: 6, gpus_per_node: 3}
)",
                               "runtime:\n  command: [env, -0]\n  pass_overrides: false\n"
                               "executor:\n  slurm: {job_dir: " +
                                   dir.path() + "/jobs}\n"),
                        base_diags);
  ASSERT_TRUE(base.complete) << diag_text(base_diags);
  for (int iteration = 0; iteration < 25; ++iteration) {
    SCOPED_TRACE("seed " + std::to_string(seed) + ", iteration " + std::to_string(iteration));
    Plan plan = base;
    plan.env.vars.clear();
    std::map<std::string, std::string> secrets;
    for (int i = 0; i < 6; ++i) {
      EnvVar v;
      v.name = "PROP_" + std::to_string(i);
      v.value = random_value(rng);
      v.secret = i == 5;
      if (v.secret) secrets[v.name] = v.value;
      plan.env.vars.push_back(v);
    }
    Diagnostics diags;
    std::string script = render(plan, diags);
    ASSERT_FALSE(script.empty()) << diag_text(diags);
    std::string file = dir.write("job.sbatch", script);
    std::string out_dir = dir.path() + "/out" + std::to_string(iteration);
    fs::create_directories(out_dir);
    std::map<std::string, std::string> env = secrets;  // as sbatch --export=ALL passes them
    env["PATH"] = dir.path() + "/bin:" + std::string(std::getenv("PATH"));
    env["SLURM_JOB_ID"] = "4242";
    env["SLURM_JOB_NODELIST"] = "node[A-B]";
    env["SLURM_JOB_NUM_NODES"] = "2";
    env["FAKE_SRUN_TASKS"] = "2";
    env["FAKE_OUT"] = out_dir;
    // Each iteration is a requeue of job 4242 (a first attempt would refuse the files the
    // previous iteration left: see SlurmProperty.AReusedJobIdDoesNotMixLogs).
    env["SLURM_RESTART_COUNT"] = std::to_string(iteration);
    auto r = run_command({"/bin/bash", file}, env);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    for (int task = 0; task < 2; ++task) {
      auto got = parse_env0(read_file(out_dir + "/task" + std::to_string(task)));
      for (const auto& v : plan.env.vars) {
        ASSERT_TRUE(got.count(v.name)) << v.name;
        EXPECT_EQ(got[v.name], v.value) << v.name << " differs on task " << task;
      }
      EXPECT_EQ(got["BRIDGE_EXPECTED_ENV"], expected_env_spec(plan.env));
      EXPECT_EQ(got["RANK"], std::to_string(task));
      EXPECT_EQ(got["LOCAL_RANK"], std::to_string(task));
      EXPECT_EQ(got["WORLD_SIZE"], "2");
      EXPECT_EQ(got["LOCAL_WORLD_SIZE"], "3");
      EXPECT_EQ(got["NODE_RANK"], "0");
      EXPECT_EQ(got["MASTER_ADDR"], "nodeA");
      EXPECT_EQ(got["MASTER_PORT"], std::to_string(slurm_master_port(4242)));
      EXPECT_EQ(got["BRIDGE_JOB_DIR"], dir.path() + "/jobs/prop/prop-dry-run");
    }
    for (const auto& [name, value] : secrets) {
      if (value.size() > 3) {
        EXPECT_EQ(script.find(value), std::string::npos) << name << " leaked";
      }
    }
    if (::testing::Test::HasFailure()) break;
  }
  // The script keeps a copy of itself in the job dir.
  EXPECT_TRUE(fs::exists(dir.path() + "/jobs/prop/prop-dry-run/job.sbatch"));
}

// A controller whose state was reset hands out old job ids again: the files of a submission
// live in a directory named after its registry id, so a second job with the same Slurm id
// writes next to, never into, the first one's; a requeue (same submission) appends to its own.
TEST(SlurmProperty, AReusedJobIdDoesNotMixLogs) {
  TempDir dir;
  write_fakes(dir.path() + "/bin");
  Diagnostics diags;
  Plan plan = make_plan(recipe("name: reuse\ncluster: {gpu: h100, num_gpus: 2, gpus_per_node: 2}\n",
                               "runtime:\n  command: [/bin/true]\n  adapter: none\n"
                               "executor:\n  slurm: {job_dir: " +
                                   dir.path() + "/jobs}\n"),
                        diags);
  ASSERT_TRUE(plan.complete) << diag_text(diags);
  std::map<std::string, std::string> env{
      {"PATH", dir.path() + "/bin:" + std::string(std::getenv("PATH"))},
      {"SLURM_JOB_ID", "9"},
      {"SLURM_JOB_NODELIST", "nodeA"},
      {"SLURM_JOB_NUM_NODES", "1"},
      {"FAKE_SRUN_TASKS", "2"},
      {"FAKE_OUT", dir.path()}};
  for (const char* id : {"reuse-20261130-120000-0001", "reuse-20261130-120000-0002"}) {
    SlurmRenderOptions options;
    options.submission_id = id;
    auto script = render_sbatch_script(plan, options, diags);
    ASSERT_TRUE(script) << diag_text(diags);
    std::string file = dir.write(std::string(id) + ".sbatch", script->text);
    auto run = run_command({"/bin/bash", file}, env);
    EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
    EXPECT_THAT(run.out, ::testing::HasSubstr(dir.path() + "/jobs/reuse/" + id));
    EXPECT_TRUE(fs::exists(dir.path() + "/jobs/reuse/" + id + "/job.sbatch")) << id;
  }
  EXPECT_FALSE(fs::exists(dir.path() + "/jobs/reuse/9"));
}

TEST(SlurmProperty, MissingSecretFailsTheJobEarly) {
  TempDir dir;
  write_fakes(dir.path() + "/bin");
  Diagnostics diags;
  Plan plan = make_plan(recipe("name: s\ncluster: {gpu: h100, num_gpus: 2, gpus_per_node: 2}\n",
                               "runtime:\n  command: [env, -0]\n  pass_overrides: false\n"
                               "executor:\n  slurm: {job_dir: " +
                                   dir.path() + "/jobs}\n"),
                        diags);
  ASSERT_TRUE(plan.complete) << diag_text(diags);
  EnvVar v;
  v.name = "ABSENT_SECRET";
  v.value = "x";
  v.secret = true;
  plan.env.vars.push_back(v);
  std::string file = dir.write("job.sbatch", render(plan, diags));
  auto r = run_command({"/bin/bash", file},
                       {{"PATH", dir.path() + "/bin:" + std::string(std::getenv("PATH"))},
                        {"SLURM_JOB_ID", "7"},
                        {"SLURM_JOB_NODELIST", "nodeA"},
                        {"FAKE_OUT", dir.path()}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("secret ABSENT_SECRET is missing"), std::string::npos) << r.err;
}

// Each failed attempt submits the next one itself (fake sbatch) while retries are left, and
// the attempts file records every start and end (executors/slurm_retry.h).
TEST(SlurmProperty, FailedRanksExitNonZeroAndResubmitWhileRetriesLeft) {
  TempDir dir;
  write_fakes(dir.path() + "/bin");
  std::ofstream(dir.path() + "/bin/sbatch") << R"(#!/bin/bash
echo "$*" >> "$FAKE_OUT/sbatch.log"
echo 10
)";
  fs::permissions(dir.path() + "/bin/sbatch", fs::perms::owner_all);
  Diagnostics diags;
  Plan plan = make_plan(recipe("name: r\ncluster: {gpu: h100, num_gpus: 2, gpus_per_node: 2}\n",
                               "runtime:\n  command: [bash, -c, exit 17]\n"
                               "  pass_overrides: false\nexecutor:\n  slurm: {retries: 2, "
                               "retry_on: [any], job_dir: " +
                                   dir.path() + "/jobs}\n"),
                        diags);
  ASSERT_TRUE(plan.complete) << diag_text(diags);
  std::string file = dir.write("job.sbatch", render(plan, diags));
  std::map<std::string, std::string> env{
      {"PATH", dir.path() + "/bin:" + std::string(std::getenv("PATH"))},
      {"SLURM_JOB_ID", "9"},
      {"SLURM_JOB_NODELIST", "nodeA"},
      {"FAKE_OUT", dir.path()}};
  const std::string attempts = dir.path() + "/jobs/r/r-dry-run/attempts";
  for (int attempt = 1; attempt <= 3; ++attempt) {
    auto r = run_command({"/bin/bash", file}, env);
    EXPECT_EQ(r.exit_code, 17) << r.err;
  }
  std::string log = read_file(attempts);
  EXPECT_THAT(log, ::testing::HasSubstr("retry attempt=1 slurm_job=9 rc=17"));
  EXPECT_THAT(log, ::testing::HasSubstr("retry attempt=2 slurm_job=9 rc=17"));
  EXPECT_THAT(log, ::testing::HasSubstr("end attempt=3 slurm_job=9 rc=17"));
  EXPECT_THAT(log, ::testing::HasSubstr("reason=no-attempts-left"));
  // Two resubmissions, of the script's copy in the job dir, with no node to exclude.
  std::string sbatch = read_file(dir.path() + "/sbatch.log");
  EXPECT_EQ(std::count(sbatch.begin(), sbatch.end(), '\n'), 2) << sbatch;
  EXPECT_THAT(sbatch,
              ::testing::HasSubstr("--parsable " + dir.path() + "/jobs/r/r-dry-run/job.sbatch"));
  EXPECT_THAT(sbatch, ::testing::Not(::testing::HasSubstr("--exclude")));
}

}  // namespace
// A custom template may write {{job_dir}} anywhere; what the user controls in it (blanks,
// `$(...)`, `;`) reaches the script as one quoted word, never as shell code (line breaks are
// refused earlier: an #SBATCH line cannot carry them).
TEST(SlurmScript, JobDirInACustomTemplateIsAlwaysOneQuotedWord) {
  TempDir dir;
  std::string tmpl =
      dir.write("custom.mustache", "#!/bin/bash\ncd {{job_dir}} && {{task_command}}\n");
  Diagnostics diags;
  Plan plan = make_plan(recipe("name: demo\ncluster: {gpu: h100, num_gpus: 8, gpus_per_node: 8}\n",
                               "executor:\n  slurm:\n    template: " + tmpl +
                                   "\n    job_dir: \"/tmp/a b$(touch /tmp/pwned);rm -rf x\"\n"),
                        diags);
  ASSERT_TRUE(plan.complete) << diag_text(diags);
  std::string script = render(plan, diags);
  ASSERT_FALSE(script.empty()) << diag_text(diags);
  EXPECT_THAT(script, ::testing::HasSubstr("cd '/tmp/a b$(touch /tmp/pwned);rm -rf x/demo' && "));
}

}  // namespace bridge

namespace bridge {
namespace {

// sbatch reads directives only up to the script's first command.
TEST(ScriptSetsComment, OnlyInTheLeadingCommentBlockAndOnlyTheSameComment) {
  EXPECT_TRUE(script_sets_comment(
      "#!/bin/bash\n#SBATCH --job-name=a\n\n#SBATCH --comment=c:1\nsrun x\n", "c:1"));
  EXPECT_FALSE(script_sets_comment("#!/bin/bash\n#SBATCH --comment=c:2\nsrun x\n", "c:1"));
  EXPECT_FALSE(script_sets_comment("#!/bin/bash\nset -e\n#SBATCH --comment=c:1\n", "c:1"));
  EXPECT_FALSE(script_sets_comment("#!/bin/bash\nsrun x\n", "c:1"));
  EXPECT_FALSE(script_sets_comment("", "c:1"));
  // sbatch keeps the last comment directive, in any spelling it accepts.
  EXPECT_FALSE(
      script_sets_comment("#!/bin/bash\n#SBATCH --comment=c:1\n#SBATCH --comment x\n", "c:1"));
  EXPECT_FALSE(
      script_sets_comment("#!/bin/bash\n#SBATCH --comment=c:1\n#SBATCH --comm=x\n", "c:1"));
  EXPECT_TRUE(
      script_sets_comment("#!/bin/bash\n#SBATCH --comment=x\n#SBATCH --comment=c:1\n", "c:1"));
  EXPECT_TRUE(sbatch_option_sets_comment("--com=a"));
  EXPECT_FALSE(sbatch_option_sets_comment("--co=a"));  // ambiguous for sbatch (--constraint, ...)
  EXPECT_FALSE(sbatch_option_sets_comment("--constraint=a"));
}

// The Qwen3 example names Megatron-Bridge's tuned recipe: its sbatch script exports the
// recipe's env_vars with the recipe's values (CUDA_DEVICE_MAX_CONNECTIONS=32, the LayerNorm
// margins 20), and every rank's expected-env check covers them (docs/recipe.md, "The recipe
// base").
TEST(SlurmRecipeBase, TheQwenExampleExportsTheRecipesEnvAndChecksIt) {
  Diagnostics diags;
  Plan plan = make_plan(
      read_file(std::string(BRIDGE_SOURCE_DIR) + "/examples/recipes/qwen3-30b-a3b-ep-overlap.yaml"),
      diags);
  ASSERT_TRUE(plan.complete) << diag_text(diags);
  std::string script = render(plan, diags);
  for (const char* line :
       {"export CUDA_DEVICE_MAX_CONNECTIONS='32'", "export NVTE_FWD_LAYERNORM_SM_MARGIN='20'",
        "export NVTE_BWD_LAYERNORM_SM_MARGIN='20'"})
    EXPECT_NE(script.find(line), std::string::npos) << line;
  size_t expected = script.find("export BRIDGE_EXPECTED_ENV='");
  ASSERT_NE(expected, std::string::npos);
  std::string checked = script.substr(expected, script.find('\n', expected) - expected);
  for (const char* name : {"CUDA_DEVICE_MAX_CONNECTIONS=", "NVTE_FWD_LAYERNORM_SM_MARGIN=",
                           "NVTE_BWD_LAYERNORM_SM_MARGIN="})
    EXPECT_NE(checked.find(name), std::string::npos) << name;
}

}  // namespace
}  // namespace bridge
