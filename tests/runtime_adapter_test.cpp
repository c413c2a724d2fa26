// Runtime adapters (plan/runtime_adapter.h): golden argument vectors for each adapter,
// placeholders, contradictions between runtime.args and the plan, the GPU table (unknown
// GPU, declared architecture, gn default), and effective retries.
#include "plan/runtime_adapter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "model/gpu_table.h"
#include "plan/plan.h"
#include "system/host_env.h"
#include "tests/support/map_environment.h"

namespace bridge {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

Plan make_plan(const std::string& recipe, Diagnostics& diags,
               std::vector<std::string> overrides = {}, const std::string& executor = "local") {
  MapEnvironment env(std::map<std::string, std::string>{{"HOME", "/home/alice"}});
  PlanRequest req;
  req.recipe_path = "adapter.yaml";
  req.executor = executor;
  req.overrides = std::move(overrides);
  return build_plan_from_text(recipe, req, env, plugin_registry(), diags);
}

std::string all_messages(const Diagnostics& diags) {
  std::string out;
  for (const auto& d : diags.items()) out += d.code + ": " + d.message + "\n";
  return out;
}

const char* kMegatronBridge = R"(name: mb
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
model:
  family: llama
  recipe: llama3_8b
  seq_length: 8192
  tensor_model_parallel_size: 2
  pipeline_model_parallel_size: 2
  sequence_parallel: true
  num_layers: 32
  precision: bf16
train: {global_batch_size: 128, micro_batch_size: 1, max_steps: 10, task: pretrain}
runtime:
  adapter: megatron_bridge
  command: [python, run_script.py]
)";

// Megatron prints its iteration lines on the last rank: that is whose log --wait follows,
// unless runtime.progress_rank says otherwise; a rank the job does not have is an error.
TEST(RuntimeAdapterTest, ProgressRankIsTheLastUnderMegatronBridgeAndConfigurable) {
  Diagnostics diags;
  EXPECT_EQ(make_plan(kMegatronBridge, diags, {}, "slurm").progress_rank, 15);
  EXPECT_EQ(
      make_plan(kMegatronBridge, diags, {"runtime.progress_rank=first"}, "slurm").progress_rank, 0);
  EXPECT_EQ(make_plan(kMegatronBridge, diags, {"runtime.progress_rank=7"}, "slurm").progress_rank,
            7);
  EXPECT_FALSE(diags.has_errors()) << all_messages(diags);
  Diagnostics too_big;
  make_plan(kMegatronBridge, too_big, {"runtime.progress_rank=16"}, "slurm");
  EXPECT_THAT(all_messages(too_big), HasSubstr("is 16, but the job has ranks 0..15"));
  Diagnostics negative;  // found by a new-user trial: -1 was accepted
  make_plan(kMegatronBridge, negative, {"runtime.progress_rank=-1"}, "slurm");
  EXPECT_THAT(all_messages(negative), HasSubstr("is -1, but the job has ranks 0..15"));
  Diagnostics bad;
  make_plan(kMegatronBridge, bad, {"runtime.progress_rank=middle"}, "slurm");
  EXPECT_THAT(all_messages(bad), HasSubstr("must be last, first or a rank number"));
}

TEST(RuntimeAdapterTest, MegatronBridgeFlagsThenHydra) {
  Diagnostics diags;
  Plan p = make_plan(kMegatronBridge, diags);
  ASSERT_TRUE(p.complete) << all_messages(diags);
  EXPECT_EQ(p.adapter, "megatron_bridge");
  std::vector<std::string> argv = runtime_argv(p);
  // The flags run_script.py needs, then only what the recipe sets: the recipe base
  // (llama3_8b's performance recipe) decides vpp, cp, ep, etp and the comm_overlap section in
  // the runtime as in the plan, so none of them is sent.
  EXPECT_THAT(argv, ElementsAreArray<std::string>({"python",
                                                   "run_script.py",
                                                   "-m",
                                                   "llama",
                                                   "-mr",
                                                   "llama3_8b",
                                                   "-g",
                                                   "h100",
                                                   "-ng",
                                                   "16",
                                                   "-gn",
                                                   "8",
                                                   "-tp",
                                                   "2",
                                                   "-pp",
                                                   "2",
                                                   "-sl",
                                                   "8192",
                                                   "-gb",
                                                   "128",
                                                   "-mb",
                                                   "1",
                                                   "-ms",
                                                   "10",
                                                   "-c",
                                                   "bf16",
                                                   "--task",
                                                   "pretrain",
                                                   "model.num_layers=32",
                                                   "model.sequence_parallel=true"}));
  EXPECT_EQ(p.topology->cp, 2);  // the recipe base's context parallelism, kept
  // Keys carried by a flag never appear a second time as Hydra overrides.
  for (const auto& w : argv) {
    EXPECT_THAT(w, ::testing::Not(HasSubstr("tensor_model_parallel_size=")));
    EXPECT_THAT(w, ::testing::Not(HasSubstr("model.precision=")));
    EXPECT_THAT(w, ::testing::Not(HasSubstr("model.family=")));
  }
}

TEST(RuntimeAdapterTest, MegatronBridgeNeedsFamilyRecipeAndAnAcceptedGpu) {
  Diagnostics diags;
  make_plan(kMegatronBridge, diags, {"model.family=null", "cluster.gpu=h200"});
  std::string text = all_messages(diags);
  EXPECT_THAT(text, HasSubstr("megatron-bridge-needs-key: runtime adapter megatron_bridge: "
                              "run_script.py requires -m/--model_family_name"));
  EXPECT_THAT(text, HasSubstr("megatron-bridge-gpu"));
  EXPECT_THAT(text, HasSubstr("`h200`"));
}

TEST(RuntimeAdapterTest, MegatronBridgeRefusesAPrecisionItsParserLacks) {
  Diagnostics diags;
  make_plan(kMegatronBridge, diags, {"model.precision=fp16"});
  EXPECT_TRUE(diags.has_code("megatron-bridge-precision")) << all_messages(diags);
}

TEST(RuntimeAdapterTest, CommandLineSizesReachTheRuntime) {
  Diagnostics diags;
  Plan p = make_plan(kMegatronBridge, diags, {"cluster.num_gpus=128"});
  ASSERT_TRUE(p.complete) << all_messages(diags);
  std::vector<std::string> argv = runtime_argv(p);
  auto ng = std::find(argv.begin(), argv.end(), "-ng");
  ASSERT_NE(ng, argv.end());
  EXPECT_EQ(*(ng + 1), "128");
}

TEST(RuntimeAdapterTest, HydraEmitsThePlanAndTheUsersKeysOnly) {
  Diagnostics diags;
  Plan p = make_plan(R"(name: h
cluster: {gpu: h100, num_gpus: 8}
model: {tensor_model_parallel_size: 2, hidden_size: 4096, recompute_modules: [core_attn, mlp],
        gradient_accumulation_fusion: True}
ddp: {use_distributed_optimizer: true}
runtime: {command: [python, train.py]}
)",
                     diags);
  ASSERT_TRUE(p.complete) << all_messages(diags);
  EXPECT_EQ(p.adapter, "hydra");
  std::vector<std::string> texts;
  for (const auto& a : p.runtime_args)
    if (a.source == "adapter:hydra") texts.push_back(a.text);
  std::vector<std::string> head(texts.begin(), texts.begin() + 10);
  EXPECT_THAT(
      head, ElementsAre(
                "model.tensor_model_parallel_size=2", "model.pipeline_model_parallel_size=1",
                "model.virtual_pipeline_model_parallel_size=null", "model.context_parallel_size=1",
                "model.expert_model_parallel_size=1", "model.expert_tensor_parallel_size=2",
                "model.gradient_accumulation_fusion=true", "model.hidden_size=4096",
                "model.recompute_modules=[core_attn,mlp]", "++comm_overlap=null"));
  EXPECT_THAT(texts[10], ::testing::StartsWith("++comm_overlap={_target_:"));
  for (const auto& t : texts)
    EXPECT_THAT(t, ::testing::Not(::testing::StartsWith("comm_overlap.")));
  // ddp.* comes from the overlap resolution (after the comm_overlap fields), not the recipe.
  EXPECT_THAT(texts, ::testing::Contains("ddp.use_distributed_optimizer=true"));
  for (const auto& t : texts) EXPECT_THAT(t, ::testing::Not(HasSubstr("cluster.")));
}

// A script that builds a library recipe the plan has as its base (`--recipe NAME`) gets only
// what the user set, as run_script.py does: the layout, precision and the recipe's tuned
// comm_overlap section stay the library recipe's (issue 45; the conformance suite's
// fidelity-library cases build every such recipe both ways).
TEST(RuntimeAdapterTest, HydraOnALibraryRecipeSendsOnlyTheUsersKeys) {
  const std::string recipe = R"(name: h
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
runtime: {adapter: hydra, transformer_engine: "2.9.0",
          command: [python, run_recipe.py, --recipe, qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config]}
)";
  Diagnostics diags;
  Plan p = make_plan(recipe, diags);
  ASSERT_TRUE(p.complete) << all_messages(diags);
  ASSERT_EQ(p.recipe->base.function, "qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config");
  EXPECT_THAT(runtime_argv(p), ElementsAre("python", "run_recipe.py", "--recipe",
                                           "qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config"));
  Diagnostics knob;
  Plan q = make_plan(recipe, knob, {"comm_overlap.overlap_grad_reduce=false", "train.max_steps=5"});
  ASSERT_TRUE(q.complete) << all_messages(knob);
  std::vector<std::string> texts;
  for (const auto& a : q.runtime_args)
    if (a.source == "adapter:hydra") texts.push_back(a.text);
  EXPECT_THAT(texts, ElementsAre("train.train_iters=5", "comm_overlap.overlap_grad_reduce=false"));
}

// A PEFT library recipe needs the checkpoint it adapts on the command line, as with
// megatron_bridge's train.task peft: the release refuses the config without one.
TEST(RuntimeAdapterTest, HydraOnAPeftLibraryRecipeNeedsTheCheckpoint) {
  const std::string recipe = R"(name: h
cluster: {gpu: h100, num_gpus: 8}
runtime: {adapter: hydra, transformer_engine: "2.9.0",
          command: [python, run_recipe.py, --recipe, gpt_oss_20b_peft_config]}
)";
  Diagnostics diags;
  make_plan(recipe, diags);
  EXPECT_TRUE(diags.has_code("megatron-bridge-peft-needs-checkpoint")) << all_messages(diags);
  Diagnostics given;
  make_plan(recipe, given, {"runtime.args=[checkpoint.pretrained_checkpoint=/ckpt]"});
  EXPECT_FALSE(given.has_code("megatron-bridge-peft-needs-checkpoint")) << all_messages(given);
}

TEST(RuntimeAdapterTest, ProbeGetsThePlanAndTheExpectedPlan) {
  Diagnostics diags;
  Plan p = make_plan(R"(name: p
cluster: {gpu: h100, num_gpus: 2}
train: {global_batch_size: 4, max_steps: 3}
)",
                     diags);
  ASSERT_TRUE(p.complete) << all_messages(diags);
  EXPECT_EQ(p.adapter, "probe");
  std::vector<std::string> argv = runtime_argv(p);
  EXPECT_EQ(argv[0], "bridge-probe");
  EXPECT_THAT(argv, ::testing::Contains("cluster.num_gpus=2"));
  EXPECT_THAT(argv, ::testing::Contains("train.max_steps=3"));
  ASSERT_FALSE(p.expected_plan.empty());
  EXPECT_EQ(p.expected_plan.front(), (std::pair<std::string, std::string>{"cluster.gpu", "h100"}));
  // Every expected value is exactly what the argv carries.
  for (const auto& [key, value] : p.expected_plan)
    EXPECT_THAT(argv, ::testing::Contains(key + "=" + value));
}

TEST(RuntimeAdapterTest, NoneWarnsPerSectionByName) {
  Diagnostics diags;
  Plan p = make_plan(R"(name: n
model: {tensor_model_parallel_size: 1, num_layers: 4}
train: {max_steps: 3}
comm_overlap: {overlap_grad_reduce: true}
runtime: {adapter: none, command: [./train.sh]}
)",
                     diags);
  ASSERT_TRUE(p.complete) << all_messages(diags);
  EXPECT_THAT(runtime_argv(p), ElementsAre("./train.sh"));
  std::string text = all_messages(diags);
  EXPECT_THAT(text, HasSubstr("not-forwarded: runtime adapter `none`: the validated `model` "
                              "values (num_layers, tensor_model_parallel_size)"));
  EXPECT_THAT(text, HasSubstr("`train` values (max_steps)"));
  EXPECT_THAT(text, HasSubstr("`comm_overlap` values (overlap_grad_reduce)"));
}

TEST(RuntimeAdapterTest, PassOverridesFalseMeansNoneAndContradictsAnAdapter) {
  Diagnostics diags;
  Plan p = make_plan("name: x\nruntime: {pass_overrides: false}\n", diags);
  EXPECT_EQ(p.adapter, "none");
  Diagnostics diags2;
  make_plan("name: x\nruntime: {pass_overrides: false, adapter: probe}\n", diags2);
  EXPECT_TRUE(diags2.has_code("adapter-vs-pass-overrides")) << all_messages(diags2);
}

TEST(RuntimeAdapterTest, PlaceholdersExpandToPlanValues) {
  Diagnostics diags;
  Plan p = make_plan(R"(name: ph
cluster: {gpu: gb200, num_gpus: 8}
model: {tensor_model_parallel_size: 2}
runtime: {adapter: none, command: [run], args: ["--tp={plan.tp}", "{plan.nodes}", "x{plan.gpu}y",
          "{plan.vpp}", "{literal}"]}
)",
                     diags);
  ASSERT_TRUE(p.complete) << all_messages(diags);
  EXPECT_THAT(p.user_args, ElementsAre("--tp=2", "2", "xgb200y", "null", "{literal}"));
}

TEST(RuntimeAdapterTest, UnknownOrUnsetPlaceholderIsAnError) {
  Diagnostics diags;
  make_plan("name: ph\nruntime: {args: ['{plan.tpp}', '{plan.gb}']}\n", diags);
  std::string text = all_messages(diags);
  EXPECT_THAT(text, HasSubstr("unknown-placeholder: unknown placeholder `{plan.tpp}` (did you "
                              "mean `tp`?)"));
  EXPECT_THAT(text, HasSubstr("placeholder-unset: placeholder `{plan.gb}` has no value: "
                              "train.global_batch_size is not set"));
}

TEST(RuntimeAdapterTest, RuntimeArgsContradictingThePlanNameBothValues) {
  Diagnostics diags;
  Plan p = make_plan(std::string(kMegatronBridge) + "  args: [-tp, '4', --max_steps=10]\n", diags);
  EXPECT_FALSE(p.complete);
  std::string text = all_messages(diags);
  EXPECT_THAT(text, HasSubstr("runtime-arg-contradicts-plan: runtime.args `-tp 4` sets "
                              "model.tensor_model_parallel_size to 4, but the plan has 2"));
  EXPECT_THAT(text, HasSubstr("adapter.yaml:"));  // where the plan's value came from
  EXPECT_THAT(text, HasSubstr("runtime-arg-repeats-plan: runtime.args `--max_steps=10`"));
}

TEST(RuntimeAdapterTest, HydraOverrideInArgsIsCheckedToo) {
  Diagnostics diags;
  make_plan(
      "name: h\nmodel: {tensor_model_parallel_size: 1}\n"
      "runtime: {args: [model.tensor_model_parallel_size=2, --steps, '7']}\n"
      "train: {max_steps: 5}\n",
      diags);
  std::string text = all_messages(diags);
  EXPECT_THAT(text, HasSubstr("`model.tensor_model_parallel_size=2` sets "
                              "model.tensor_model_parallel_size to 2, but the plan has 1"));
  EXPECT_THAT(text, HasSubstr("`--steps 7` sets train.max_steps to 7, but the plan has 5"));
}

// Other spellings of a plan value: Megatron-Bridge's own key for the step count or the
// sequence length, Hydra's deletion, a precision recipe.
TEST(RuntimeAdapterTest, AliasesAndDeletionsOfPlanValuesAreContradictions) {
  for (const char* arg :
       {"train.train_iters=9", "dataset.sequence_length=2048", "~model.tensor_model_parallel_size",
        "mixed_precision=fp16_mixed", "model.fp16=true"}) {
    Diagnostics diags;
    make_plan(std::string(kMegatronBridge) + "  args: ['" + arg + "']\n", diags);
    EXPECT_TRUE(diags.has_code("runtime-arg-contradicts-plan")) << arg << all_messages(diags);
  }
  Diagnostics same;
  make_plan(std::string(kMegatronBridge) + "  args: [train.train_iters=10]\n", same);
  EXPECT_TRUE(same.has_code("runtime-arg-repeats-plan")) << all_messages(same);
  EXPECT_FALSE(same.has_errors()) << all_messages(same);
}

// megatron_bridge: the values the user set go as written, one override each, and nothing
// else of the section: the runtime applies its own rules to them as it would to the same
// overrides typed by hand, and the plan shows (and warns) what they resolve to.
TEST(RuntimeAdapterTest, DataParallelValuesGoAsTheUserWroteThem) {
  Diagnostics diags;
  Plan p = make_plan(std::string(kMegatronBridge) +
                         "ddp: {use_distributed_optimizer: true, overlap_grad_reduce: false, "
                         "bucket_size: 77}\ncomm_overlap: {overlap_param_gather: false}\n",
                     diags);
  ASSERT_TRUE(p.complete) << all_messages(diags);
  std::vector<std::string> argv = runtime_argv(p);
  EXPECT_THAT(argv, ::testing::Contains("ddp.overlap_grad_reduce=false"));
  EXPECT_THAT(argv, ::testing::Contains("ddp.bucket_size=77"));
  EXPECT_THAT(argv, ::testing::Contains("comm_overlap.overlap_param_gather=false"));
  EXPECT_THAT(argv, ::testing::Contains("ddp.use_distributed_optimizer=true"));
  EXPECT_THAT(argv, ::testing::Contains("optimizer.use_distributed_optimizer=true"));
  EXPECT_EQ(std::count_if(argv.begin(), argv.end(),
                          [](const std::string& w) { return w.find("comm_overlap") != w.npos; }),
            1);
  EXPECT_TRUE(diags.has_code("ddp-field-overridden")) << all_messages(diags);
}

// The hydra adapter speaks the ConfigContainer's names: iterations as train.train_iters, the
// precision as a mixed-precision recipe (it has no model.precision), nothing for keys the
// recipe leaves unset; and with Megatron-Bridge as the runtime an unset
// ddp.use_distributed_optimizer is its recipes' default, true, with DP overlap resolved on.
TEST(RuntimeAdapterTest, HydraUsesTheConfigContainersNamesAndMegatronBridgeDefaults) {
  Diagnostics diags;
  Plan p = make_plan(R"(name: h
cluster: {gpu: h100, num_gpus: 8}
model: {precision: bf16, compute_dtype: fp8_cs}
train: {max_steps: 7}
runtime: {command: [python, train.py]}
)",
                     diags);
  ASSERT_TRUE(p.complete) << all_messages(diags);
  std::vector<std::string> texts;
  for (const auto& a : p.runtime_args)
    if (a.source == "adapter:hydra") texts.push_back(a.text);
  EXPECT_THAT(texts, ::testing::Contains("train.train_iters=7"));
  EXPECT_THAT(texts, ::testing::Contains("mixed_precision=bf16_with_fp8_current_scaling_mixed"));
  EXPECT_THAT(texts, ::testing::Contains("ddp.use_distributed_optimizer=true"));
  EXPECT_THAT(texts, ::testing::Contains("ddp.overlap_grad_reduce=true"));
  for (const auto& t : texts) {
    EXPECT_THAT(t, ::testing::Not(HasSubstr("max_steps")));
    EXPECT_THAT(t, ::testing::Not(HasSubstr("model.precision")));
    EXPECT_THAT(t, ::testing::Not(HasSubstr("model.compute_dtype")));
  }
  Diagnostics unset;
  Plan q = make_plan(
      "name: h\ncluster: {gpu: h100, num_gpus: 8}\n"
      "runtime: {command: [python, train.py]}\n",
      unset);
  ASSERT_TRUE(q.complete) << all_messages(unset);
  for (const auto& a : q.runtime_args) EXPECT_THAT(a.text, ::testing::Not(HasSubstr("precision")));
  // The probe emulates Megatron-Core, whose default leaves the distributed optimizer off.
  Diagnostics probe;
  Plan r = make_plan("name: h\ncluster: {num_gpus: 2}\n", probe);
  ASSERT_TRUE(r.complete) << all_messages(probe);
  EXPECT_FALSE(r.overlap->ddp.use_distributed_optimizer);
}

TEST(RuntimeAdapterTest, ValuesNoProgramArgumentCanCarryAreRefused) {
  Diagnostics dash;
  make_plan(kMegatronBridge, dash, {"model.family=\"-tp\""});
  EXPECT_TRUE(dash.has_code("megatron-bridge-bad-value")) << all_messages(dash);
  // A NUL is refused where the recipe writes it (the YAML reader), before any adapter runs.
  Diagnostics nul;
  make_plan(std::string(kMegatronBridge) + "  args: [\"a\\0b\"]\n", nul);
  EXPECT_TRUE(nul.has_errors()) << all_messages(nul);
  EXPECT_THAT(all_messages(nul), HasSubstr("NUL byte")) << all_messages(nul);
}

TEST(JobDirTest, TheRecipeNameCannotLeaveTheJobDirectory) {
  Diagnostics diags;
  Plan p = make_plan("name: \"../../x:y\"\nexecutor: {local: {job_dir: /jobs}}\n", diags);
  EXPECT_EQ(p.job_dir, "/jobs/_..-..-x-y");
  Diagnostics empty;
  make_plan("name: e\nexecutor: {local: {job_dir: \"\"}}\n", empty);
  EXPECT_TRUE(empty.has_code("empty-job-dir")) << all_messages(empty);
}

TEST(RuntimeAdapterTest, TwoLayoutsGiveTwoArgvs) {
  Diagnostics d1, d2;
  Plan a = make_plan(kMegatronBridge, d1);
  Plan b = make_plan(kMegatronBridge, d2, {"model.tensor_model_parallel_size=4"});
  ASSERT_TRUE(a.complete && b.complete) << all_messages(d1) << all_messages(d2);
  EXPECT_NE(runtime_argv(a), runtime_argv(b));
}

// ---- GPU table ------------------------------------------------------------------------------

TEST(GpuTableTest, KnowsMegatronBridgeTypesPlusH200AndA100) {
  for (const char* name : {"h100", "b200", "b300", "gb200", "gb300", "vr200", "r100"}) {
    ASSERT_NE(find_gpu(name), nullptr) << name;
    EXPECT_TRUE(find_gpu(name)->megatron_bridge_name) << name;
  }
  EXPECT_EQ(find_gpu("h200")->arch, GpuArch::kHopper);
  EXPECT_EQ(find_gpu("a100")->arch, GpuArch::kAmpere);
  EXPECT_EQ(find_gpu("gb200")->default_gpus_per_node, 4);
  EXPECT_EQ(find_gpu("gb200")->nvlink_domain, 72);
  EXPECT_EQ(find_gpu("r100")->default_gpus_per_node, 1);
  EXPECT_EQ(find_gpu("nope"), nullptr);
}

TEST(GpuTableTest, GpusPerNodeDefaultsFromTheTable) {
  Diagnostics diags;
  Plan p = make_plan("name: g\ncluster: {gpu: gb200, num_gpus: 8}\n", diags, {}, "slurm");
  ASSERT_TRUE(p.topology) << all_messages(diags);
  EXPECT_EQ(p.topology->gpus_per_node, 4);
  EXPECT_EQ(p.topology->nodes, 2);
  EXPECT_TRUE(p.topology->blackwell_or_newer());
}

TEST(GpuTableTest, UnknownGpuIsAnErrorWithSuggestion) {
  Diagnostics diags;
  make_plan("name: g\ncluster: {gpu: h10}\n", diags);
  std::string text = all_messages(diags);
  EXPECT_THAT(text, HasSubstr("unknown-gpu: unknown GPU type `h10` (did you mean `h100`?)"));
}

TEST(GpuTableTest, DeclaredArchitectureAcceptsANewGpu) {
  Diagnostics diags;
  Plan p = make_plan("name: g\ncluster: {gpu: x900, gpu_arch: blackwell, num_gpus: 8}\n", diags);
  ASSERT_TRUE(p.topology) << all_messages(diags);
  EXPECT_TRUE(p.topology->blackwell_or_newer());
  EXPECT_EQ(p.topology->nvlink_domain, 0);
  Diagnostics contradicting;
  make_plan("name: g\ncluster: {gpu: h100, gpu_arch: blackwell}\n", contradicting);
  EXPECT_TRUE(contradicting.has_code("gpu-arch-contradicts-table"));
}

TEST(EffectiveRetriesTest, RecipeWinsOverPluginAndLocalNeverRetries) {
  Diagnostics diags;
  Plan p = make_plan("name: r\nexecutor: {slurm: {retries: 2}}\n", diags, {}, "slurm");
  EXPECT_EQ(effective_retries(p), 2);
  Diagnostics diags2;
  Plan local = make_plan("name: r\nexecutor: {slurm: {retries: 2}}\n", diags2, {}, "local");
  EXPECT_EQ(effective_retries(local), 0);
}

}  // namespace
}  // namespace bridge
