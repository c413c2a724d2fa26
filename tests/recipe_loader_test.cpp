// Recipe loading (recipe.md): schema, types, unknown keys, error collection and positions,
// hostile YAML, the key reference, and KEY=VALUE overrides.
#include "model/recipe_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/yaml_tree.h"
#include "tests/support/build_paths.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

struct Loaded {
  std::optional<Recipe> recipe;
  Diagnostics diags;
};

Loaded load(std::string_view text, const std::vector<std::string>& overrides = {}) {
  Loaded l;
  l.recipe = load_recipe_text(text, "recipe.yaml", overrides, l.diags);
  return l;
}

std::string fixture(const std::string& name) {
  return std::string(BRIDGE_TEST_DATA) + "/recipes/" + name;
}

using test::find_diag;

std::string dump(const Diagnostics& diags) {
  std::string s;
  for (const auto& d : diags.items()) s += format_diagnostic(d, false);
  return s;
}

// 1-based {line, column} of the first occurrence of `needle` in `text` at or after the first
// occurrence of `after` (when given); with `skip_needle` the position just after the needle,
// i.e. where the value written after "key: " starts.
std::pair<int, int> pos_of(const std::string& text, const std::string& needle,
                           bool skip_needle = false, const std::string& after = "") {
  size_t from = after.empty() ? 0 : text.find(after);
  EXPECT_NE(from, std::string::npos) << after;
  size_t at = text.find(needle, from == std::string::npos ? 0 : from);
  EXPECT_NE(at, std::string::npos) << needle;
  if (at == std::string::npos) return {0, 0};
  if (skip_needle) at += needle.size();
  auto begin = text.begin();
  int line = 1 + static_cast<int>(std::count(begin, begin + static_cast<long>(at), '\n'));
  size_t line_start = at == 0 ? std::string::npos : text.rfind('\n', at - 1);
  line_start = line_start == std::string::npos ? 0 : line_start + 1;
  return {line, static_cast<int>(at - line_start) + 1};
}

std::pair<int, int> value_pos(const std::string& text, const std::string& key_and_colon,
                              const std::string& after = "") {
  return pos_of(text, key_and_colon, true, after);
}

void expect_at(const SourceLoc& loc, std::pair<int, int> pos, const std::string& file) {
  EXPECT_EQ(loc.file, file);
  EXPECT_EQ(loc.line, pos.first);
  EXPECT_EQ(loc.column, pos.second);
  EXPECT_FALSE(loc.from_override());
}

// Loads `text` and expects exactly one error, with `code` at `path`; returns it.
Diagnostic single_error(const std::string& text, const std::string& code, const std::string& path) {
  Loaded l = load(text);
  EXPECT_FALSE(l.recipe) << text;
  EXPECT_EQ(l.diags.count(Severity::kError), 1u) << dump(l.diags);
  const Diagnostic* d = find_diag(l.diags, code, path);
  EXPECT_NE(d, nullptr) << "no " << code << " at " << path << " in:\n" << dump(l.diags);
  return d ? *d : Diagnostic{};
}

// ---------------------------------------------------------------------------------------
// Good values: the complete example of recipe.md loads with typed values and locations.

TEST(RecipeLoaderTest, FullExampleLoadsEveryKeyTyped) {
  const std::string path = fixture("full.yaml");
  const std::string text = test::read_file(path);
  ASSERT_FALSE(text.empty());
  Diagnostics diags;
  auto r = load_recipe(path, {}, diags);
  ASSERT_TRUE(r) << dump(diags);
  EXPECT_EQ(diags.count(Severity::kError), 0u);
  EXPECT_EQ(r->file, path);

  EXPECT_EQ(r->name.value, "qwen3-30b-a3b-ep-overlap");
  EXPECT_EQ(r->description.value, "EP=16 alltoall, overlap on");
  EXPECT_EQ(r->cluster.gpu.value, "h100");
  EXPECT_EQ(r->cluster.num_gpus.value, 16);
  EXPECT_EQ(r->cluster.gpus_per_node.value, 8);

  const ModelSpec& m = r->model;
  EXPECT_EQ(m.tensor_model_parallel_size.value, 1);
  EXPECT_EQ(m.pipeline_model_parallel_size.value, 1);
  EXPECT_FALSE(user_set(m.virtual_pipeline_model_parallel_size));  // null = unset
  EXPECT_EQ(m.context_parallel_size.value, 1);
  EXPECT_EQ(m.expert_model_parallel_size.value, 16);
  EXPECT_FALSE(user_set(m.expert_tensor_parallel_size));
  EXPECT_EQ(m.sequence_parallel.value, false);
  EXPECT_EQ(m.num_layers.value, 48);
  EXPECT_EQ(m.hidden_size.value, 2048);
  EXPECT_EQ(m.num_attention_heads.value, 32);
  EXPECT_EQ(m.num_moe_experts.value, 128);
  EXPECT_EQ(m.moe_token_dispatcher_type.value, "alltoall");
  EXPECT_FALSE(user_set(m.moe_flex_dispatcher_backend));
  // The recipe names qwen3_30b_a3b on 16 H100s, whose flex backend (hybridep) the alltoall
  // dispatcher it sets leaves nothing to do: the plan drops it, as the adapter's
  // `--moe_flex_dispatcher_backend None` does in the runtime.
  EXPECT_FALSE(m.moe_flex_dispatcher_backend.is_set());
  EXPECT_EQ(m.moe_shared_expert_overlap.value, false);
  EXPECT_FALSE(user_set(m.moe_shared_expert_intermediate_size));
  EXPECT_EQ(m.moe_permute_fusion.value, false);
  EXPECT_FALSE(user_set(m.mtp_num_layers));
  EXPECT_EQ(m.precision.value, "bf16");
  EXPECT_EQ(m.compute_dtype.value, "bf16");
  EXPECT_EQ(m.recompute_granularity.value, "selective");
  EXPECT_FALSE(user_set(m.recompute_method));
  EXPECT_FALSE(user_set(m.recompute_num_layers));
  EXPECT_EQ(m.recompute_modules.value, StringList{"core_attn"});
  EXPECT_EQ(m.gradient_accumulation_fusion.value, true);
  EXPECT_EQ(m.add_bias_linear.value, false);
  EXPECT_EQ(m.add_qkv_bias.value, false);
  EXPECT_EQ(m.cuda_graph_impl.value, "none");
  ASSERT_TRUE(m.cuda_graph_scope.is_set());  // [] is an empty list, not null
  EXPECT_THAT(*m.cuda_graph_scope.value, IsEmpty());
  EXPECT_EQ(m.overlap_moe_expert_parallel_comm.value, false);

  const CommOverlapSpec& c = r->comm_overlap;
  EXPECT_EQ(c.tp_comm_overlap.value, false);
  EXPECT_FALSE(user_set(c.tp_comm_overlap_cfg));
  EXPECT_EQ(c.tp_comm_bootstrap_backend.value, "nccl");
  EXPECT_FALSE(c.overlap_p2p_comm.is_set());
  EXPECT_FALSE(c.batch_p2p_comm.is_set());
  EXPECT_FALSE(user_set(c.overlap_grad_reduce));
  EXPECT_FALSE(user_set(c.overlap_param_gather));
  EXPECT_FALSE(user_set(c.overlap_param_gather_with_optimizer_step));
  EXPECT_FALSE(user_set(c.align_param_gather));
  EXPECT_FALSE(user_set(c.bucket_size));
  EXPECT_FALSE(user_set(c.defer_embedding_wgrad_compute));
  EXPECT_FALSE(user_set(c.wgrad_deferral_limit));
  EXPECT_EQ(c.overlap_moe_expert_parallel_comm.value, true);
  EXPECT_EQ(c.delay_wgrad_compute.value, false);

  EXPECT_EQ(r->ddp.use_distributed_optimizer.value, true);
  EXPECT_FALSE(user_set(r->ddp.overlap_grad_reduce));
  EXPECT_FALSE(user_set(r->ddp.bucket_size));
  EXPECT_FALSE(user_set(r->optimizer.overlap_param_gather_with_optimizer_step));
  EXPECT_EQ(r->mixed_precision.grad_reduce_in_fp32.value, false);
  EXPECT_EQ(r->mixed_precision.fp8_param_gather.value, false);
  EXPECT_EQ(r->train.global_batch_size.value, 1024);
  EXPECT_EQ(r->train.micro_batch_size.value, 1);
  EXPECT_EQ(r->train.max_steps.value, 8);

  const RuntimeSpec& rt = r->runtime;
  EXPECT_EQ(rt.launcher.value, "srun");
  EXPECT_EQ(rt.command.value,
            (StringList{"python", "/opt/Megatron-Bridge/scripts/performance/run_script.py"}));
  EXPECT_EQ(rt.adapter.value, "megatron_bridge");
  EXPECT_EQ(r->model.family.value, "qwen");
  EXPECT_EQ(r->model.recipe.value, "qwen3_30b_a3b");
  EXPECT_EQ(r->train.task.value, "pretrain");
  EXPECT_FALSE(user_set(rt.args));
  EXPECT_EQ(rt.container_image.value, "nvcr.io/nvidia/nemo:25.11");
  EXPECT_FALSE(user_set(rt.workdir));
  ASSERT_TRUE(rt.transformer_engine.is_set());
  EXPECT_TRUE(rt.transformer_engine.value->present);
  EXPECT_EQ(rt.transformer_engine.value->version, "2.9.0");
  EXPECT_EQ(rt.torch.value, "2.9.0");

  ASSERT_EQ(r->plugins.size(), 2u);
  EXPECT_EQ(r->plugins[0].name, "perf_env");
  EXPECT_TRUE(r->plugins[0].options.is_map());
  EXPECT_THAT(r->plugins[0].options.entries, IsEmpty());
  EXPECT_EQ(r->plugins[1].name, "preemption");
  const YamlNode* preempt = r->plugins[1].options.find("preempt_time");
  ASSERT_NE(preempt, nullptr);
  EXPECT_EQ(preempt->scalar, "60");
  expect_at(r->plugins[1].loc, pos_of(text, "preemption:"), path);  // the plugin's name

  ASSERT_EQ(r->env.size(), 1u);
  EXPECT_EQ(r->env[0].name, "NCCL_DEBUG");
  EXPECT_EQ(r->env[0].value, "WARN");
  EXPECT_FALSE(r->env[0].secret);
  EXPECT_FALSE(r->env[0].expand);
  expect_at(r->env[0].loc, value_pos(text, "NCCL_DEBUG: "), path);

  const ExecutorSpec& x = r->executor;
  EXPECT_EQ(x.default_executor.value, "slurm");
  EXPECT_EQ(x.slurm.account.value, "my-account");
  EXPECT_EQ(x.slurm.partition.value, "batch");
  EXPECT_EQ(x.slurm.time.value, "00:30:00");
  EXPECT_EQ(x.slurm.container_mounts.value, StringList{"/lustre:/lustre"});
  EXPECT_EQ(x.slurm.exclusive.value, true);
  EXPECT_EQ(x.slurm.job_dir.value, "~/bridge-launch/jobs");  // expanded at plan time only
  EXPECT_EQ(x.kubernetes.namespace_.value, "training");
  EXPECT_EQ(x.kubernetes.api.value, "jobset");
  EXPECT_THAT(r->overrides, IsEmpty());

  // Locations point at the value: file, 1-based line and column.
  expect_at(r->name.loc, value_pos(text, "name: "), path);
  expect_at(m.num_layers.loc, value_pos(text, "  num_layers: "), path);
  expect_at(m.recompute_modules.loc, value_pos(text, "recompute_modules: "), path);
  expect_at(m.overlap_moe_expert_parallel_comm.loc,
            value_pos(text, "overlap_moe_expert_parallel_comm: "), path);
  expect_at(c.overlap_moe_expert_parallel_comm.loc,
            value_pos(text, "overlap_moe_expert_parallel_comm: ", "comm_overlap:"), path);
  expect_at(rt.transformer_engine.loc, value_pos(text, "transformer_engine: "), path);
  expect_at(x.slurm.account.loc, value_pos(text, "account: "), path);
}

TEST(RecipeLoaderTest, MinimalRecipeLeavesEverythingUnset) {
  Diagnostics diags;
  auto r = load_recipe(fixture("minimal.yaml"), {}, diags);
  ASSERT_TRUE(r) << dump(diags);
  EXPECT_THAT(diags.items(), IsEmpty());
  EXPECT_EQ(r->name.value, "minimal");
  EXPECT_FALSE(r->cluster.num_gpus.is_set());
  EXPECT_FALSE(r->model.tensor_model_parallel_size.is_set());
  EXPECT_FALSE(r->comm_overlap.tp_comm_overlap.is_set());
  EXPECT_FALSE(r->runtime.transformer_engine.is_set());  // absent = present, version unknown
  EXPECT_THAT(r->plugins, IsEmpty());
  EXPECT_THAT(r->env, IsEmpty());
}

TEST(RecipeLoaderTest, ExecutorKeysBeyondTheExampleLoad) {
  Loaded l = load(R"(name: x
executor:
  default: kubernetes
  local: {job_dir: /tmp/jobs, grace_period: 5, timeout: 0}
  slurm:
    qos: high
    mem: 0
    container_workdir: /work
    dependency: afterok:12
    sbatch_args: [--gres=gpu:8]
    retries: 2
    template: my.sbatch
  kubernetes:
    context: prod
    retries: 1
    secret_name: keys
    shm_size: 64Gi
    service_account: trainer
    image_pull_secrets: [ngc]
    job_dir: /workspace/jobs
    api: job
)");
  ASSERT_TRUE(l.recipe) << dump(l.diags);
  const ExecutorSpec& x = l.recipe->executor;
  EXPECT_EQ(x.default_executor.value, "kubernetes");
  EXPECT_EQ(x.local.job_dir.value, "/tmp/jobs");
  EXPECT_EQ(x.local.grace_period.value, 5);
  EXPECT_EQ(x.local.timeout.value, 0);
  EXPECT_EQ(x.slurm.qos.value, "high");
  EXPECT_EQ(x.slurm.mem.value, "0");
  EXPECT_EQ(x.slurm.container_workdir.value, "/work");
  EXPECT_EQ(x.slurm.dependency.value, "afterok:12");
  EXPECT_EQ(x.slurm.sbatch_args.value, StringList{"--gres=gpu:8"});
  EXPECT_EQ(x.slurm.retries.value, 2);
  EXPECT_EQ(x.slurm.template_path.value, "my.sbatch");
  EXPECT_EQ(x.kubernetes.context.value, "prod");
  EXPECT_EQ(x.kubernetes.retries.value, 1);
  EXPECT_EQ(x.kubernetes.secret_name.value, "keys");
  EXPECT_EQ(x.kubernetes.shm_size.value, "64Gi");
  EXPECT_EQ(x.kubernetes.service_account.value, "trainer");
  EXPECT_EQ(x.kubernetes.image_pull_secrets.value, StringList{"ngc"});
  EXPECT_EQ(x.kubernetes.job_dir.value, "/workspace/jobs");
  EXPECT_EQ(x.kubernetes.api.value, "job");
}

TEST(RecipeLoaderTest, TransformerEngineVersionFalseOrAbsent) {
  Loaded off = load("name: x\nruntime:\n  transformer_engine: false\n");
  ASSERT_TRUE(off.recipe) << dump(off.diags);
  ASSERT_TRUE(off.recipe->runtime.transformer_engine.is_set());
  EXPECT_FALSE(off.recipe->runtime.transformer_engine.value->present);

  Loaded unquoted = load("name: x\nruntime:\n  transformer_engine: 2.12\n");
  ASSERT_TRUE(unquoted.recipe) << dump(unquoted.diags);
  EXPECT_EQ(unquoted.recipe->runtime.transformer_engine.value->version, "2.12");

  Diagnostic d = single_error("name: x\nruntime:\n  transformer_engine: true\n", "wrong-type",
                              "runtime.transformer_engine");
  EXPECT_THAT(d.message, HasSubstr("version string or false"));
  EXPECT_EQ(d.loc.line, 3);
  EXPECT_EQ(d.loc.column, 23);
  single_error("name: x\nruntime:\n  transformer_engine: [2, 9]\n", "wrong-type",
               "runtime.transformer_engine");
}

TEST(RecipeLoaderTest, NullMeansUnset) {
  Loaded l = load(R"(name: x
cluster:
model:
  num_layers: null
  sequence_parallel: ~
  recompute_modules:
  moe_token_dispatcher_type: null
comm_overlap:
  tp_comm_overlap: null
  tp_comm_overlap_cfg: null
plugins:
env:
executor:
  slurm:
)");
  ASSERT_TRUE(l.recipe) << dump(l.diags);
  EXPECT_THAT(l.diags.items(), IsEmpty());
  EXPECT_FALSE(l.recipe->model.num_layers.is_set());
  EXPECT_FALSE(l.recipe->model.sequence_parallel.is_set());
  EXPECT_FALSE(l.recipe->model.recompute_modules.is_set());
  EXPECT_FALSE(l.recipe->model.moe_token_dispatcher_type.is_set());
  EXPECT_FALSE(l.recipe->comm_overlap.tp_comm_overlap.is_set());
  EXPECT_FALSE(l.recipe->comm_overlap.tp_comm_overlap_cfg.is_set());
  EXPECT_THAT(l.recipe->plugins, IsEmpty());
  EXPECT_THAT(l.recipe->env, IsEmpty());
}

TEST(RecipeLoaderTest, TpCommOverlapCfgKeepsPresetOrMapping) {
  Loaded preset = load(
      "name: x\ncomm_overlap:\n  tp_comm_overlap_cfg: userbuffers_bf16_h100_h8192_tp4_mbs1_"
      "seqlen8192\n");
  ASSERT_TRUE(preset.recipe) << dump(preset.diags);
  ASSERT_TRUE(preset.recipe->comm_overlap.tp_comm_overlap_cfg.is_set());
  EXPECT_TRUE(preset.recipe->comm_overlap.tp_comm_overlap_cfg.value->is_scalar());

  Loaded inline_cfg = load(
      "name: x\ncomm_overlap:\n  tp_comm_overlap_cfg:\n    qkv_fprop: {method: ring_exchange}\n");
  ASSERT_TRUE(inline_cfg.recipe) << dump(inline_cfg.diags);
  const YamlNode& cfg = *inline_cfg.recipe->comm_overlap.tp_comm_overlap_cfg.value;
  ASSERT_TRUE(cfg.is_map());
  EXPECT_NE(cfg.find("qkv_fprop"), nullptr);
}

// ---------------------------------------------------------------------------------------
// Wrong types, one per kind.

TEST(RecipeLoaderTest, WrongTypeInteger) {
  Diagnostic d =
      single_error("name: x\nmodel:\n  num_layers: many\n", "wrong-type", "model.num_layers");
  EXPECT_EQ(d.severity, Severity::kError);
  EXPECT_THAT(d.message, HasSubstr("`model.num_layers` expects an integer"));
  EXPECT_THAT(d.message, HasSubstr("`many`"));
  EXPECT_EQ(d.loc.file, "recipe.yaml");
  EXPECT_EQ(d.loc.line, 3);
  EXPECT_EQ(d.loc.column, 15);
  EXPECT_THAT(d.help, HasSubstr("num_layers: 4"));

  single_error("name: x\nmodel:\n  hidden_size: 1.5\n", "wrong-type", "model.hidden_size");
  single_error("name: x\nmodel:\n  hidden_size: 0x10\n", "wrong-type", "model.hidden_size");
  single_error("name: x\nmodel:\n  hidden_size: [1]\n", "wrong-type", "model.hidden_size");
  single_error("name: x\ntrain:\n  max_steps: true\n", "wrong-type", "train.max_steps");
  // A quoted number is a string, like a quoted "true".
  single_error("name: x\nmodel:\n  num_layers: \"4\"\n", "wrong-type", "model.num_layers");
  // Signs without digits, or digits around a sign, are malformed, not out of range.
  single_error("name: x\nmodel:\n  num_layers: +\n", "wrong-type", "model.num_layers");
  single_error("name: x\nmodel:\n  num_layers: 1-2\n", "wrong-type", "model.num_layers");
}

TEST(RecipeLoaderTest, IntegerBoundsAndRange) {
  Diagnostic zero = single_error("name: x\nmodel:\n  tensor_model_parallel_size: 0\n",
                                 "out-of-range", "model.tensor_model_parallel_size");
  EXPECT_THAT(zero.message, HasSubstr("must be >= 1, got 0"));
  EXPECT_EQ(zero.loc.line, 3);
  single_error("name: x\ncluster:\n  num_gpus: -8\n", "out-of-range", "cluster.num_gpus");

  // 2^63 does not fit an int64: an error, not a wrap-around.
  Diagnostic big = single_error("name: x\nmodel:\n  num_layers: 9223372036854775808\n",
                                "out-of-range", "model.num_layers");
  EXPECT_THAT(big.message, HasSubstr("out of range"));
  EXPECT_THAT(big.message, HasSubstr("9223372036854775808"));
  EXPECT_EQ(big.loc.column, 15);
  single_error("name: x\ncomm_overlap:\n  wgrad_deferral_limit: -9223372036854775809\n",
               "out-of-range", "comm_overlap.wgrad_deferral_limit");

  // 2^63 - 1 and negative values without a bound load.
  Loaded max = load(
      "name: x\nmodel:\n  num_layers: 9223372036854775807\n"
      "comm_overlap:\n  wgrad_deferral_limit: -1\n");
  ASSERT_TRUE(max.recipe) << dump(max.diags);
  EXPECT_EQ(max.recipe->model.num_layers.value, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(max.recipe->comm_overlap.wgrad_deferral_limit.value, -1);
  // num_moe_experts and mtp_num_layers accept 0.
  Loaded zero_ok = load("name: x\nmodel:\n  num_moe_experts: 0\n  mtp_num_layers: 0\n");
  ASSERT_TRUE(zero_ok.recipe) << dump(zero_ok.diags);
  EXPECT_EQ(zero_ok.recipe->model.mtp_num_layers.value, 0);
}

// A quoted number is a string to YAML: the message says so and the fix drops the quotes.
TEST(RecipeLoaderTest, AQuotedNumberIsNamedAsAQuotedString) {
  Diagnostic d =
      single_error("name: x\nmodel:\n  num_layers: \"80\"\n", "wrong-type", "model.num_layers");
  EXPECT_THAT(d.message, HasSubstr("expects an integer, got the quoted string \"80\""));
  EXPECT_EQ(d.help, "remove the quotes: `num_layers: 80`");
}

TEST(RecipeLoaderTest, ATabInTheIndentationIsNamed) {
  Loaded l = load("name: x\ncluster:\n  gpu: h100\n\tnum_gpus: 8\n");
  ASSERT_FALSE(l.recipe);
  ASSERT_EQ(l.diags.items().size(), 1u) << dump(l.diags);
  const Diagnostic& d = l.diags.items()[0];
  EXPECT_EQ(d.code, "yaml-tab-indent");
  EXPECT_THAT(d.message, HasSubstr("a tab in the indentation"));
  EXPECT_EQ(d.loc.line, 4);
  EXPECT_EQ(d.loc.column, 1);
  EXPECT_EQ(d.help, "replace the tab with spaces");
}

TEST(RecipeLoaderTest, PrecisionSpelledAsPyTorchDoesSuggestsTheRecipeName) {
  Diagnostic d =
      single_error("name: x\nmodel:\n  precision: bfloat16\n", "bad-value", "model.precision");
  EXPECT_THAT(d.message, HasSubstr("did you mean `bf16`?"));
}

TEST(RecipeLoaderTest, WrongTypeBoolean) {
  Diagnostic quoted = single_error("name: x\nmodel:\n  sequence_parallel: \"true\"\n", "wrong-type",
                                   "model.sequence_parallel");
  EXPECT_THAT(quoted.message, HasSubstr("expects a boolean, got the quoted string \"true\""));
  EXPECT_THAT(quoted.help, HasSubstr("remove the quotes: `sequence_parallel: true`"));
  EXPECT_EQ(quoted.loc.line, 3);
  EXPECT_EQ(quoted.loc.column, 22);
  single_error("name: x\nmodel:\n  sequence_parallel: 'false'\n", "wrong-type",
               "model.sequence_parallel");
  single_error("name: x\nmodel:\n  sequence_parallel: 1\n", "wrong-type",
               "model.sequence_parallel");
  single_error("name: x\nmodel:\n  sequence_parallel: yes\n", "wrong-type",
               "model.sequence_parallel");
  single_error("name: x\nddp:\n  use_distributed_optimizer: {a: 1}\n", "wrong-type",
               "ddp.use_distributed_optimizer");

  Loaded spelled = load("name: x\nmodel:\n  sequence_parallel: True\n  add_qkv_bias: FALSE\n");
  ASSERT_TRUE(spelled.recipe) << dump(spelled.diags);
  EXPECT_EQ(spelled.recipe->model.sequence_parallel.value, true);
  EXPECT_EQ(spelled.recipe->model.add_qkv_bias.value, false);
}

TEST(RecipeLoaderTest, WrongEnumValueSuggestsTheClosest) {
  Diagnostic d = single_error("name: x\nmodel:\n  moe_token_dispatcher_type: alltoal\n",
                              "bad-value", "model.moe_token_dispatcher_type");
  EXPECT_THAT(d.message, HasSubstr("one of allgather | alltoall | flex"));
  EXPECT_THAT(d.message, HasSubstr("`alltoal`"));
  EXPECT_THAT(d.message, HasSubstr("did you mean `alltoall`?"));
  EXPECT_EQ(d.loc.line, 3);
  EXPECT_EQ(d.loc.column, 30);

  Diagnostic far =
      single_error("name: x\nmodel:\n  precision: int4\n", "bad-value", "model.precision");
  EXPECT_THAT(far.message, HasSubstr("bf16 | fp16 | fp32"));
  EXPECT_THAT(far.message, Not(HasSubstr("did you mean")));
  single_error("name: x\nmodel:\n  compute_dtype: [bf16]\n", "bad-value", "model.compute_dtype");
  single_error("name: x\nmodel:\n  recompute_granularity: none\n", "bad-value",
               "model.recompute_granularity");
  single_error("name: x\nruntime:\n  launcher: mpirun\n", "bad-value", "runtime.launcher");
  single_error("name: x\nexecutor:\n  default: slrum\n", "bad-value", "executor.default");
  single_error("name: x\nexecutor:\n  kubernetes: {api: deployment}\n", "bad-value",
               "executor.kubernetes.api");
}

TEST(RecipeLoaderTest, WrongTypeList) {
  Diagnostic d = single_error("name: x\nmodel:\n  recompute_modules: core_attn\n", "wrong-type",
                              "model.recompute_modules");
  EXPECT_THAT(d.message, HasSubstr("expects a list"));
  EXPECT_THAT(d.help, HasSubstr("[a, b]"));
  Diagnostic item = single_error("name: x\nmodel:\n  cuda_graph_scope: [attn, [mlp]]\n",
                                 "wrong-type", "model.cuda_graph_scope");
  EXPECT_THAT(item.message, HasSubstr("items of `model.cuda_graph_scope` must be strings"));
  EXPECT_EQ(item.loc.line, 3);
  EXPECT_EQ(item.loc.column, 28);  // the offending item, not the list
  single_error("name: x\nruntime:\n  command: {python: 3}\n", "wrong-type", "runtime.command");
  Diagnostic empty_cmd =
      single_error("name: x\nruntime:\n  command: []\n", "bad-value", "runtime.command");
  EXPECT_THAT(empty_cmd.message, HasSubstr("empty list"));
}

TEST(RecipeLoaderTest, WrongTypeSectionAndString) {
  Diagnostic d = single_error("name: x\nmodel: 5\n", "wrong-type", "model");
  EXPECT_THAT(d.message, HasSubstr("expects a mapping"));
  EXPECT_EQ(d.loc.line, 2);
  EXPECT_EQ(d.loc.column, 8);
  single_error("name: x\ncluster: [a, b]\n", "wrong-type", "cluster");
  single_error("name: x\nexecutor:\n  slurm: on\n", "wrong-type", "executor.slurm");
  single_error("name: x\nplugins: [perf_env]\n", "wrong-type", "plugins");
  single_error("name: x\nenv: FOO=1\n", "wrong-type", "env");
  Diagnostic s = single_error("name: x\ndescription: {first: x}\n", "wrong-type", "description");
  EXPECT_THAT(s.message, HasSubstr("expects a string"));
  single_error("name: x\ncluster:\n  gpu: [h100]\n", "wrong-type", "cluster.gpu");
}

TEST(RecipeLoaderTest, NameIsRequired) {
  Loaded none = load("description: no name\n");
  EXPECT_FALSE(none.recipe);
  const Diagnostic* d = find_diag(none.diags, "missing-key", "name");
  ASSERT_NE(d, nullptr) << dump(none.diags);
  EXPECT_THAT(d->message, HasSubstr("no `name`"));
  EXPECT_EQ(d->loc.line, 1);

  Loaded empty = load("name: \"\"\n");
  EXPECT_FALSE(empty.recipe);
  EXPECT_NE(find_diag(empty.diags, "missing-key", "name"), nullptr);
}

// ---------------------------------------------------------------------------------------
// Unknown keys.

TEST(RecipeLoaderTest, UnknownTopLevelKeySuggests) {
  Diagnostic d = single_error("name: x\nmodle:\n  num_layers: 4\n", "unknown-key", "modle");
  EXPECT_THAT(d.message, HasSubstr("unknown key `modle` in the top level"));
  EXPECT_THAT(d.message, HasSubstr("did you mean `model`?"));
  EXPECT_EQ(d.loc.line, 2);
  EXPECT_EQ(d.loc.column, 1);  // the key itself
}

TEST(RecipeLoaderTest, UnknownNestedKeySuggests) {
  Diagnostic d = single_error("name: x\nmodel:\n  tensor_model_paralel_size: 2\n", "unknown-key",
                              "model.tensor_model_paralel_size");
  EXPECT_THAT(d.message, HasSubstr("in `model`"));
  EXPECT_THAT(d.message, HasSubstr("did you mean `tensor_model_parallel_size`?"));
  EXPECT_EQ(d.loc.line, 3);
  EXPECT_EQ(d.loc.column, 3);

  Diagnostic abbrev = single_error("name: x\nmodel:\n  tp: 2\n", "unknown-key", "model.tp");
  EXPECT_THAT(abbrev.message, HasSubstr("did you mean `tensor_model_parallel_size`?"));

  Diagnostic deep = single_error("name: x\nexecutor:\n  slurm:\n    acount: a\n", "unknown-key",
                                 "executor.slurm.acount");
  EXPECT_THAT(deep.message, HasSubstr("in `executor.slurm`"));
  EXPECT_THAT(deep.message, HasSubstr("did you mean `account`?"));
  EXPECT_EQ(deep.loc.line, 4);
  EXPECT_EQ(deep.loc.column, 5);

  Diagnostic env_form =
      single_error("name: x\nenv:\n  A: {value: v, secrt: true}\n", "unknown-key", "env.A.secrt");
  EXPECT_THAT(env_form.message, HasSubstr("did you mean `secret`?"));
}

TEST(RecipeLoaderTest, UnknownUnrelatedKeyHasNoSuggestion) {
  Diagnostic d = single_error("name: x\nmodel:\n  banana: 1\n", "unknown-key", "model.banana");
  EXPECT_THAT(d.message, Not(HasSubstr("did you mean")));
  EXPECT_THAT(d.help, HasSubstr("docs/recipe.md"));
}

TEST(RecipeLoaderTest, LaunchEnvKeysInOverlapConfigAreRejected) {  // E1, E2, E3
  Diagnostic e1 = single_error("name: x\ncomm_overlap:\n  cuda_device_max_connections: 1\n",
                               "env-in-overlap-config", "comm_overlap.cuda_device_max_connections");
  EXPECT_THAT(e1.help, HasSubstr("plugins.perf_env"));
  single_error("name: x\ncomm_overlap:\n  NVTE_FWD_LAYERNORM_SM_MARGIN: 16\n",
               "env-in-overlap-config", "comm_overlap.NVTE_FWD_LAYERNORM_SM_MARGIN");
  Diagnostic e2 = single_error("name: x\nddp:\n  grad_reduce_in_fp32: true\n",
                               "misplaced-mixed-precision-key", "ddp.grad_reduce_in_fp32");
  EXPECT_THAT(e2.message, HasSubstr("mixed_precision"));
  Diagnostic e3 =
      single_error("name: x\nddp:\n  bucket_size: 128MB\n", "bucket-size-units", "ddp.bucket_size");
  EXPECT_THAT(e3.message, HasSubstr("PARAMETER count"));
  single_error("name: x\ncomm_overlap:\n  bucket_size: \"134217728\"\n", "bucket-size-units",
               "comm_overlap.bucket_size");
  Loaded ok = load("name: x\ncomm_overlap:\n  bucket_size: 134217728\n");
  ASSERT_TRUE(ok.recipe) << dump(ok.diags);
  EXPECT_EQ(ok.recipe->comm_overlap.bucket_size.value, 134217728);
}

// ---------------------------------------------------------------------------------------
// Error collection and positions.

TEST(RecipeLoaderTest, AllErrorsAreCollectedInOneRun) {
  Diagnostics diags;
  auto r = load_recipe(fixture("multiple_errors.yaml"), {}, diags);
  EXPECT_FALSE(r);
  EXPECT_EQ(diags.count(Severity::kError), 3u) << dump(diags);
  const Diagnostic* type = find_diag(diags, "wrong-type", "model.num_layers");
  const Diagnostic* unknown = find_diag(diags, "unknown-key", "model.sequence_paralel");
  const Diagnostic* steps = find_diag(diags, "wrong-type", "train.max_steps");
  ASSERT_NE(type, nullptr) << dump(diags);
  ASSERT_NE(unknown, nullptr) << dump(diags);
  ASSERT_NE(steps, nullptr) << dump(diags);
  EXPECT_EQ(type->loc.line, 4);
  EXPECT_EQ(type->loc.column, 15);
  EXPECT_EQ(unknown->loc.line, 5);
  EXPECT_EQ(unknown->loc.column, 3);
  EXPECT_THAT(unknown->message, HasSubstr("did you mean `sequence_parallel`?"));
  EXPECT_EQ(steps->loc.line, 7);
  EXPECT_EQ(steps->loc.column, 14);
  EXPECT_EQ(steps->loc.file, fixture("multiple_errors.yaml"));
}

TEST(RecipeLoaderTest, ErrorsAcrossSectionsAreCollected) {
  Loaded l = load(R"(cluster:
  num_gpus: sixteen
model:
  precision: bf17
runtime:
  lancher: srun
executor:
  slurm:
    exclusive: "yes"
)");
  EXPECT_FALSE(l.recipe);
  EXPECT_NE(find_diag(l.diags, "wrong-type", "cluster.num_gpus"), nullptr);
  EXPECT_NE(find_diag(l.diags, "bad-value", "model.precision"), nullptr);
  EXPECT_NE(find_diag(l.diags, "unknown-key", "runtime.lancher"), nullptr);
  EXPECT_NE(find_diag(l.diags, "wrong-type", "executor.slurm.exclusive"), nullptr);
  EXPECT_NE(find_diag(l.diags, "missing-key", "name"), nullptr);
  EXPECT_EQ(l.diags.count(Severity::kError), 5u) << dump(l.diags);
}

// A step that failed after the job was submitted reports its errors as warnings: same code,
// position and help, the reason appended to the message, and no error left to stop the command.
TEST(DiagnosticsTest, ErrorsAddedAsWarningsKeepEverythingButTheSeverity) {
  SourceLoc at;
  at.file = "jobs/x.json";
  at.line = 3;
  at.column = 7;
  Diagnostics failed;
  failed.error("registry-write", "jobs/x.json", at, "disk full", "free space");
  Diagnostics d;
  d.add_as_warnings(failed, "; the job runs");
  ASSERT_EQ(d.items().size(), 1u);
  const Diagnostic& w = d.items()[0];
  EXPECT_EQ(w.severity, Severity::kWarning);
  EXPECT_EQ(w.code, "registry-write");
  EXPECT_EQ(w.path, "jobs/x.json");
  EXPECT_EQ(w.loc.line, 3);
  EXPECT_EQ(w.loc.column, 7);
  EXPECT_EQ(w.message, "disk full; the job runs");
  EXPECT_EQ(w.help, "free space");
  EXPECT_FALSE(d.has_errors());
}

TEST(RecipeLoaderTest, FormattedDiagnosticShowsFileLineColumnAndCaret) {
  test::TempDir dir;
  std::string path = dir.write("bad.yaml", "name: x\nmodel:\n  num_layers: many\n");
  Diagnostics diags;
  EXPECT_FALSE(load_recipe(path, {}, diags));
  ASSERT_EQ(diags.items().size(), 1u);
  std::string text = format_diagnostic(diags.items()[0], false);
  EXPECT_THAT(text, HasSubstr(path + ":3:15: error: "));
  EXPECT_THAT(text, HasSubstr("[wrong-type]"));
  EXPECT_THAT(text, HasSubstr("  num_layers: many"));
  EXPECT_THAT(text, HasSubstr("| " + std::string(14, ' ') + "^"));  // caret under column 15
}

// A secret's source text is hidden in excerpts on every line it covers, whatever its
// spelling (escapes, '' in single quotes, a line break inside quotes), and each caret stays
// under its key: the excerpt shows <secret> where the source had longer or shorter text.
TEST(RecipeLoaderTest, ExcerptsHideASecretAsWrittenOnEveryLineItCovers) {
  test::TempDir dir;
  std::string path = dir.write("secret.yaml",
                               "name: t\n"
                               "env: {S: {secret: true, first: 1, value: \"SEKRIT one \\x41\n"
                               "  two-SEKRIT\", second: 1}, B: {value: 'SEKRIT''s', secret: on, "
                               "third: 2}}\n");
  Diagnostics diags;
  EXPECT_FALSE(load_recipe(path, {}, diags));
  std::map<std::string, std::string> under_caret;  // unknown key -> shown text from the caret
  for (const auto& d : diags.items()) {
    std::string text = format_diagnostic(d, false, diags.secrets(), diags.secret_sources());
    EXPECT_THAT(text, Not(HasSubstr("SEKRIT"))) << text;
    EXPECT_THAT(text, HasSubstr("<secret>")) << text;
    // "  NNNN | <line>\n       | <spaces>^\n"
    size_t bar = text.find(" | ");
    size_t eol = text.find('\n', bar);
    ASSERT_NE(bar, std::string::npos) << text;
    std::string shown = text.substr(bar + 3, eol - bar - 3);
    size_t caret_bar = text.find("| ", eol);
    size_t caret = text.find('^', caret_bar);
    ASSERT_NE(caret, std::string::npos) << text;
    under_caret[d.path] = shown.substr(caret - caret_bar - 2);
  }
  EXPECT_THAT(under_caret["env.S.first"], ::testing::StartsWith("first: 1, value: <secret>"));
  EXPECT_THAT(under_caret["env.S.second"],
              ::testing::StartsWith("second: 1}, B: {value: <secret>, secret: on"));
  EXPECT_THAT(under_caret["env.B.third"], ::testing::StartsWith("third: 2}}"));
}

// ---------------------------------------------------------------------------------------
// Hostile or broken YAML: an error with a position, never a crash or an exception.

TEST(RecipeLoaderTest, MissingFile) {
  Diagnostics diags;
  auto r = load_recipe(fixture("does-not-exist.yaml"), {}, diags);
  EXPECT_FALSE(r);
  const Diagnostic* d = find_diag(diags, "file-not-found");
  ASSERT_NE(d, nullptr) << dump(diags);
  EXPECT_THAT(d->message, HasSubstr("does-not-exist.yaml"));
}

TEST(RecipeLoaderTest, EmptyFileAndCommentsOnly) {
  Diagnostics diags;
  EXPECT_FALSE(load_recipe(fixture("empty.yaml"), {}, diags));
  const Diagnostic* d = find_diag(diags, "empty-recipe");
  ASSERT_NE(d, nullptr) << dump(diags);
  EXPECT_EQ(d->loc.line, 1);
  EXPECT_NE(find_diag(load(" \n\t\n").diags, "empty-recipe"), nullptr);
  EXPECT_NE(find_diag(load("# only a comment\n").diags, "empty-recipe"), nullptr);
}

TEST(RecipeLoaderTest, TopLevelMustBeAMapping) {
  Diagnostics diags;
  EXPECT_FALSE(load_recipe(fixture("top_level_list.yaml"), {}, diags));
  const Diagnostic* d = find_diag(diags, "not-a-mapping");
  ASSERT_NE(d, nullptr) << dump(diags);
  EXPECT_THAT(d->message, HasSubstr("got a list"));
  EXPECT_EQ(d->loc.line, 1);
  EXPECT_NE(find_diag(load("just a string\n").diags, "not-a-mapping"), nullptr);
  // Overrides (-ng etc.) do not hide the real problem.
  Loaded with_override = load("- a\n- b\n", {"cluster.num_gpus=16"});
  EXPECT_FALSE(with_override.recipe);
  EXPECT_NE(find_diag(with_override.diags, "not-a-mapping"), nullptr) << dump(with_override.diags);
}

TEST(RecipeLoaderTest, SyntaxErrorHasPositionAndOneLineReason) {
  Loaded l = load("name: x\nmodel: [unclosed\n");
  EXPECT_FALSE(l.recipe);
  ASSERT_EQ(l.diags.items().size(), 1u);
  const Diagnostic& d = l.diags.items()[0];
  EXPECT_EQ(d.code, "yaml-syntax");
  EXPECT_THAT(d.message, HasSubstr("invalid YAML: "));
  EXPECT_EQ(d.message.find('\n'), std::string::npos);
  EXPECT_GE(d.loc.line, 2);
  EXPECT_GE(d.loc.column, 1);

  Loaded indent = load("model:\n    a: 1\n  b: 2\n");
  const Diagnostic* bad = find_diag(indent.diags, "yaml-syntax");
  ASSERT_NE(bad, nullptr) << dump(indent.diags);
  EXPECT_EQ(bad->loc.line, 3);
}

TEST(RecipeLoaderTest, DuplicateKeysAreErrors) {
  Loaded l = load("name: a\nmodel:\n  num_layers: 1\n  num_layers: 2\nname: b\n");
  EXPECT_FALSE(l.recipe);
  EXPECT_EQ(l.diags.count(Severity::kError), 2u) << dump(l.diags);
  std::vector<std::pair<int, int>> where;
  for (const auto& d : l.diags.items()) {
    EXPECT_EQ(d.code, "duplicate-key");
    where.emplace_back(d.loc.line, d.loc.column);
  }
  EXPECT_THAT(where, ElementsAre(std::pair{4, 3}, std::pair{5, 1}));
  EXPECT_THAT(l.diags.items()[0].message, HasSubstr("duplicate key `num_layers`"));
}

TEST(RecipeLoaderTest, MultipleDocumentsAreRejected) {
  Loaded l = load("name: a\n---\nname: b\n");
  EXPECT_FALSE(l.recipe);
  const Diagnostic* d = find_diag(l.diags, "yaml-multiple-documents");
  ASSERT_NE(d, nullptr) << dump(l.diags);
  EXPECT_EQ(d->loc.line, 2) << "the `---` that starts the second document";
  EXPECT_THAT(d->help, HasSubstr("one job per recipe file"));
  // A leading document marker alone is fine.
  Loaded one = load("---\nname: a\n");
  EXPECT_TRUE(one.recipe) << dump(one.diags);
}

TEST(RecipeLoaderTest, NulBytesAreRejected) {
  std::string text = "name: x\n";
  text += std::string("\0\0\x01\x02", 4);
  Loaded l = load(text);
  EXPECT_FALSE(l.recipe);
  const Diagnostic* d = find_diag(l.diags, "yaml-syntax");
  ASSERT_NE(d, nullptr) << dump(l.diags);
  EXPECT_THAT(d->message, HasSubstr("NUL"));
}

TEST(RecipeLoaderTest, NonUtf8BytesDoNotCrash) {
  for (const std::string& text :
       {std::string("name: \xff\xfe bad\n"), std::string("\xc3\x28\xa0\xa1: \xe2\x82\n"),
        std::string("\x89PNG\r\n\x1a\n"), std::string("model:\n  \xff: 1\nname: x\n")}) {
    Loaded l;
    EXPECT_NO_THROW(l = load(text));
    // Either loaded or rejected with an error, never both or neither.
    EXPECT_EQ(l.recipe.has_value(), !l.diags.has_errors()) << dump(l.diags);
  }
  // Unknown bytes as a key are an unknown key, located.
  Loaded key = load("name: x\nmodel:\n  \xff\xfe: 1\n");
  EXPECT_FALSE(key.recipe);
  const Diagnostic* d = find_diag(key.diags, "unknown-key");
  ASSERT_NE(d, nullptr) << dump(key.diags);
  EXPECT_EQ(d->loc.line, 3);
}

TEST(RecipeLoaderTest, DeepNestingIsStopped) {
  std::string text = "name: x\nmodel: " + std::string(100, '[') + std::string(100, ']') + "\n";
  Loaded l = load(text);
  EXPECT_FALSE(l.recipe);
  const Diagnostic* d = find_diag(l.diags, "yaml-limit");
  ASSERT_NE(d, nullptr) << dump(l.diags);
  EXPECT_THAT(d->message, HasSubstr("nesting deeper than 64"));
  EXPECT_EQ(d->loc.line, 2);

  // Far deeper than any parser stack should handle: still just an error.
  std::string abyss =
      "name: x\nmodel: " + std::string(100000, '[') + std::string(100000, ']') + "\n";
  Loaded deep;
  EXPECT_NO_THROW(deep = load(abyss));
  EXPECT_FALSE(deep.recipe);
  EXPECT_TRUE(deep.diags.has_errors());

  std::string block = "name: x\nmodel:\n";
  for (int i = 0; i < 80; ++i) block += std::string(2 * static_cast<size_t>(i + 1), ' ') + "k:\n";
  EXPECT_NE(find_diag(load(block).diags, "yaml-limit"), nullptr);
}

TEST(RecipeLoaderTest, AliasBombIsStopped) {
  // "Billion laughs": 10^9 leaves through nine levels of aliases.
  std::string text = "name: x\nlol: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  std::string prev = "a";
  for (char c = 'b'; c <= 'j'; ++c) {
    text += std::string("l") + c + ": &" + c + " [";
    for (int k = 0; k < 10; ++k) text += (k ? ", *" : "*") + prev;
    text += "]\n";
    prev = std::string(1, c);
  }
  // Stopped by counting, not by time: an unbounded expansion would end in ctest's timeout.
  Loaded l = load(text);
  EXPECT_FALSE(l.recipe);
  const Diagnostic* d = find_diag(l.diags, "yaml-limit");
  ASSERT_NE(d, nullptr) << dump(l.diags);
  EXPECT_THAT(d->message, HasSubstr("alias bomb"));
}

TEST(RecipeLoaderTest, NonScalarKeysAreRejected) {
  Loaded l = load("name: x\n? [a, b]\n: 1\n");
  EXPECT_FALSE(l.recipe);
  EXPECT_NE(find_diag(l.diags, "yaml-limit"), nullptr) << dump(l.diags);
}

// ---------------------------------------------------------------------------------------
// env: and plugins:

TEST(RecipeLoaderTest, EnvPlainAndLongForm) {
  Loaded l = load(R"(name: x
env:
  NCCL_DEBUG: WARN
  RETRIES: 5
  _PRIVATE: ""
  WANDB_API_KEY: {value: "${WANDB_API_KEY}", secret: true}
  LD_PRELOAD_X: {value: "$(pwd)/lib.so", expand: true}
)");
  ASSERT_TRUE(l.recipe) << dump(l.diags);
  const auto& env = l.recipe->env;
  ASSERT_EQ(env.size(), 5u);
  EXPECT_EQ(env[0].name, "NCCL_DEBUG");
  EXPECT_EQ(env[1].name, "RETRIES");
  EXPECT_EQ(env[1].value, "5");
  EXPECT_EQ(env[2].value, "");
  EXPECT_EQ(env[3].name, "WANDB_API_KEY");
  EXPECT_EQ(env[3].value, "${WANDB_API_KEY}");  // not expanded at load time
  EXPECT_TRUE(env[3].secret);
  EXPECT_FALSE(env[3].expand);
  EXPECT_EQ(env[4].value, "$(pwd)/lib.so");
  EXPECT_TRUE(env[4].expand);
  EXPECT_FALSE(env[4].secret);
  EXPECT_EQ(env[0].loc.line, 3);
  EXPECT_EQ(env[0].loc.column, 15);
}

TEST(RecipeLoaderTest, EnvNamesAndFormsAreValidated) {
  Loaded l = load(R"(name: x
env:
  1BAD: x
  HAS-DASH: x
  NOVALUE: {secret: true}
  LISTED: [a]
  NULLED: null
  BADSECRET: {value: v, secret: "yes"}
)");
  EXPECT_FALSE(l.recipe);
  const Diagnostic* digit = find_diag(l.diags, "bad-env-name", "env.1BAD");
  ASSERT_NE(digit, nullptr) << dump(l.diags);
  EXPECT_EQ(digit->loc.line, 3);
  EXPECT_EQ(digit->loc.column, 3);
  EXPECT_NE(find_diag(l.diags, "bad-env-name", "env.HAS-DASH"), nullptr);
  const Diagnostic* novalue = find_diag(l.diags, "missing-key", "env.NOVALUE.value");
  ASSERT_NE(novalue, nullptr) << dump(l.diags);
  EXPECT_THAT(novalue->message, HasSubstr("needs a `value`"));
  EXPECT_NE(find_diag(l.diags, "wrong-type", "env.LISTED"), nullptr);
  EXPECT_NE(find_diag(l.diags, "wrong-type", "env.NULLED"), nullptr);
  EXPECT_NE(find_diag(l.diags, "wrong-type", "env.BADSECRET.secret"), nullptr);
  EXPECT_EQ(l.diags.count(Severity::kError), 6u) << dump(l.diags);
}

TEST(RecipeLoaderTest, PluginOptionsMustBeMappings) {
  Loaded ok = load("name: x\nplugins:\n  nsys: {steps: [3, 4]}\n  perf_env:\n  wandb: {}\n");
  ASSERT_TRUE(ok.recipe) << dump(ok.diags);
  ASSERT_EQ(ok.recipe->plugins.size(), 3u);  // recipe order
  EXPECT_EQ(ok.recipe->plugins[0].name, "nsys");
  EXPECT_EQ(ok.recipe->plugins[1].name, "perf_env");
  EXPECT_EQ(ok.recipe->plugins[2].name, "wandb");
  EXPECT_EQ(ok.recipe->plugins[0].loc.line, 3);
  EXPECT_EQ(ok.recipe->plugins[0].loc.column, 3);

  Loaded bad = load("name: x\nplugins:\n  wandb: 5\n  nsys: [a]\n");
  EXPECT_FALSE(bad.recipe);
  const Diagnostic* scalar = find_diag(bad.diags, "wrong-type", "plugins.wandb");
  ASSERT_NE(scalar, nullptr) << dump(bad.diags);
  EXPECT_THAT(scalar->message, HasSubstr("must be a mapping"));
  EXPECT_THAT(scalar->help, HasSubstr("wandb: {}"));
  EXPECT_EQ(scalar->loc.line, 3);
  EXPECT_EQ(scalar->loc.column, 10);
  EXPECT_NE(find_diag(bad.diags, "wrong-type", "plugins.nsys"), nullptr);
}

// ---------------------------------------------------------------------------------------
// The key reference and the docs.

TEST(RecipeLoaderTest, KeyReferenceCoversTheSchema) {
  auto ref = recipe_key_reference();
  std::map<std::string, std::string> types;
  for (const auto& k : ref) {
    EXPECT_TRUE(types.emplace(k.path, k.type).second) << "duplicate " << k.path;
    EXPECT_NE(k.type, "section") << k.path;
    EXPECT_FALSE(k.type.empty()) << k.path;
  }
  EXPECT_EQ(types["name"], "string");
  EXPECT_EQ(types["model.tensor_model_parallel_size"], "integer");
  EXPECT_EQ(types["model.sequence_parallel"], "boolean");
  EXPECT_EQ(types["model.recompute_modules"], "list of strings");
  EXPECT_EQ(types["model.moe_token_dispatcher_type"], "one of allgather | alltoall | flex");
  EXPECT_EQ(types["executor.slurm.account"], "string");
  for (const char* key :
       {"cluster.num_gpus", "cluster.gpus_per_node", "comm_overlap.tp_comm_overlap_cfg",
        "comm_overlap.bucket_size", "ddp.bucket_size", "mixed_precision.fp8_param_gather",
        "optimizer.overlap_param_gather_with_optimizer_step", "train.max_steps",
        "runtime.transformer_engine", "executor.default", "executor.local.grace_period",
        "executor.slurm.template", "executor.kubernetes.namespace"})
    EXPECT_EQ(types.count(key), 1u) << key;
  // 14 overlap fields, all documented.
  size_t overlap = std::count_if(ref.begin(), ref.end(), [](const RecipeKeyDoc& d) {
    return d.path.rfind("comm_overlap.", 0) == 0;
  });
  EXPECT_EQ(overlap, 14u);
  // Calling it twice gives the same answer (no global state left behind).
  EXPECT_EQ(recipe_key_reference().size(), ref.size());
}

TEST(RecipeLoaderTest, EveryReferenceKeyIsDocumented) {
  const std::string docs_path = std::string(BRIDGE_TEST_DATA) + "/../../docs/recipe.md";
  const std::string docs = test::read_file(docs_path);
  ASSERT_FALSE(docs.empty()) << "cannot read " << docs_path;
  for (const auto& k : recipe_key_reference())
    EXPECT_NE(docs.find("`" + k.path + "`"), std::string::npos)
        << "docs/recipe.md does not document `" << k.path << "` (" << k.type << ")";
  for (const auto& section : recipe_sections())
    EXPECT_NE(docs.find("`" + section + "`"), std::string::npos) << section;
}

// The other direction: every key row of the reference tables (`| \`a.b\` | ...`) is a key the
// loader knows, so the docs cannot describe a key that no longer exists.
TEST(RecipeLoaderTest, EveryDocumentedKeyIsKnownToTheLoader) {
  const std::string docs = test::read_file(std::string(BRIDGE_TEST_DATA) + "/../../docs/recipe.md");
  std::set<std::string> known;
  for (const auto& k : recipe_key_reference()) known.insert(k.path);
  for (const auto& s : recipe_sections()) known.insert(s);
  std::regex row(R"(\n\| `([a-z_]+(\.[a-z_]+)*)` \|)");
  size_t rows = 0;
  for (std::sregex_iterator it(docs.begin(), docs.end(), row), end; it != end; ++it) {
    std::string key = (*it)[1];
    // env and plugins hold user-named entries, documented by example, not loader keys.
    if (key.rfind("env.", 0) == 0 || key.rfind("plugins.", 0) == 0) continue;
    ++rows;
    EXPECT_TRUE(known.count(key)) << "docs/recipe.md documents `" << key
                                  << "`, which the loader does not know";
  }
  EXPECT_GT(rows, 60u);
}

// ---------------------------------------------------------------------------------------
// KEY=VALUE overrides.

TEST(OverridesTest, ScalarOverrideCarriesTheOverrideAsLocation) {
  Loaded l = load("name: x\n", {"model.num_layers=4"});
  ASSERT_TRUE(l.recipe) << dump(l.diags);
  const Field<int64_t>& f = l.recipe->model.num_layers;
  EXPECT_EQ(f.value, 4);
  EXPECT_EQ(f.loc.line, 0);
  EXPECT_FALSE(f.loc.has_position());
  EXPECT_EQ(f.loc.override_arg, "model.num_layers=4");
  EXPECT_EQ(f.loc.describe(), "override 'model.num_layers=4'");
  EXPECT_THAT(l.recipe->overrides, ElementsAre("model.num_layers=4"));
}

TEST(OverridesTest, TypedScalars) {
  Loaded l = load("name: x\n", {"model.sequence_parallel=true", "cluster.gpu=h200",
                                "comm_overlap.overlap_moe_expert_parallel_comm=false",
                                "name=\"renamed job\"", "runtime.transformer_engine=false"});
  ASSERT_TRUE(l.recipe) << dump(l.diags);
  EXPECT_EQ(l.recipe->model.sequence_parallel.value, true);
  EXPECT_EQ(l.recipe->cluster.gpu.value, "h200");
  EXPECT_EQ(l.recipe->comm_overlap.overlap_moe_expert_parallel_comm.value, false);
  EXPECT_EQ(l.recipe->name.value, "renamed job");
  EXPECT_FALSE(l.recipe->runtime.transformer_engine.value->present);
}

TEST(OverridesTest, FlowListOverride) {
  Loaded l = load("name: x\nmodel:\n  recompute_modules: [core_attn]\n",
                  {"model.recompute_modules=[core_attn,mlp]"});
  ASSERT_TRUE(l.recipe) << dump(l.diags);
  EXPECT_EQ(l.recipe->model.recompute_modules.value, (StringList{"core_attn", "mlp"}));
  EXPECT_EQ(l.recipe->model.recompute_modules.loc.override_arg,
            "model.recompute_modules=[core_attn,mlp]");
  Loaded empty = load("name: x\n", {"model.cuda_graph_scope=[]"});
  ASSERT_TRUE(empty.recipe) << dump(empty.diags);
  EXPECT_THAT(*empty.recipe->model.cuda_graph_scope.value, IsEmpty());
}

TEST(OverridesTest, CreatesAbsentSections) {
  Loaded l = load("name: x\nplugins:\n",
                  {"executor.slurm.account=acct", "plugins.perf_env={}", "env.FOO=bar"});
  ASSERT_TRUE(l.recipe) << dump(l.diags);
  EXPECT_EQ(l.recipe->executor.slurm.account.value, "acct");
  ASSERT_EQ(l.recipe->plugins.size(), 1u);
  EXPECT_EQ(l.recipe->plugins[0].name, "perf_env");
  ASSERT_EQ(l.recipe->env.size(), 1u);
  EXPECT_EQ(l.recipe->env[0].value, "bar");
}

TEST(OverridesTest, OverrideWinsOverFileValue) {
  Loaded l = load("name: x\nmodel:\n  num_layers: 48\n  hidden_size: 2048\n",
                  {"model.num_layers=24", "model.num_layers=12"});
  ASSERT_TRUE(l.recipe) << dump(l.diags);
  EXPECT_EQ(l.recipe->model.num_layers.value, 12);  // last one wins
  EXPECT_EQ(l.recipe->model.num_layers.loc.override_arg, "model.num_layers=12");
  EXPECT_EQ(l.recipe->model.hidden_size.value, 2048);
  EXPECT_EQ(l.recipe->model.hidden_size.loc.line, 4);  // untouched values keep positions
}

TEST(OverridesTest, NullOverrideUnsets) {
  Loaded l = load("name: x\nmodel:\n  num_layers: 48\n", {"model.num_layers=null"});
  ASSERT_TRUE(l.recipe) << dump(l.diags);
  EXPECT_FALSE(l.recipe->model.num_layers.is_set());
}

TEST(OverridesTest, UnknownKeySuggestsAndNamesTheOverride) {
  Loaded l = load("name: x\n", {"model.tp=4"});
  EXPECT_FALSE(l.recipe);
  ASSERT_EQ(l.diags.count(Severity::kError), 1u) << dump(l.diags);
  const Diagnostic& d = l.diags.items()[0];
  EXPECT_EQ(d.code, "unknown-key");
  EXPECT_EQ(d.path, "model.tp");
  EXPECT_THAT(d.message, HasSubstr("did you mean `tensor_model_parallel_size`?"));
  EXPECT_EQ(d.loc.line, 0);
  EXPECT_EQ(d.loc.column, 0);
  EXPECT_EQ(d.loc.override_arg, "model.tp=4");
  EXPECT_THAT(format_diagnostic(d, false), HasSubstr("override 'model.tp=4'"));
}

TEST(OverridesTest, WrongTypeThroughOverrideNamesTheOverride) {
  Loaded l = load("name: x\nmodel:\n  num_layers: 48\n", {"model.num_layers=many"});
  EXPECT_FALSE(l.recipe);
  const Diagnostic* d = find_diag(l.diags, "wrong-type", "model.num_layers");
  ASSERT_NE(d, nullptr) << dump(l.diags);
  EXPECT_EQ(d->loc.line, 0);
  EXPECT_EQ(d->loc.override_arg, "model.num_layers=many");
  Loaded item = load("name: x\n", {"model.recompute_modules=[core_attn,[x]]"});
  const Diagnostic* i = find_diag(item.diags, "wrong-type", "model.recompute_modules");
  ASSERT_NE(i, nullptr) << dump(item.diags);
  EXPECT_EQ(i->loc.line, 0);  // nested values of an override have no file position either
  EXPECT_EQ(i->loc.override_arg, "model.recompute_modules=[core_attn,[x]]");
}

TEST(OverridesTest, EmptyValueIsAnError) {
  for (const std::string& arg :
       std::vector<std::string>{"model.num_layers=", "model.num_layers=  "}) {
    Loaded l = load("name: x\n", {arg});
    EXPECT_FALSE(l.recipe);
    const Diagnostic* d = find_diag(l.diags, "bad-override", "model.num_layers");
    ASSERT_NE(d, nullptr) << dump(l.diags);
    EXPECT_THAT(d->message, HasSubstr("empty value for `model.num_layers`"));
    EXPECT_THAT(d->help, HasSubstr("model.num_layers=null"));
    EXPECT_EQ(d->loc.line, 0);
    EXPECT_EQ(d->loc.override_arg, arg);
  }
}

TEST(OverridesTest, MalformedKeys) {
  for (const std::string& arg :
       std::vector<std::string>{"=3", "no_equals_sign", "a..b=1", ".a=1", "a.=1", "a. b=1"}) {
    Loaded l = load("name: x\n", {arg});
    EXPECT_FALSE(l.recipe) << arg;
    ASSERT_EQ(l.diags.count(Severity::kError), 1u) << arg << "\n" << dump(l.diags);
    const Diagnostic& d = l.diags.items()[0];
    EXPECT_EQ(d.code, "bad-override") << arg;
    EXPECT_THAT(d.message, ::testing::AnyOf(HasSubstr("KEY=VALUE"), HasSubstr("malformed key")))
        << arg;
    EXPECT_EQ(d.loc.override_arg, arg);
    EXPECT_EQ(d.loc.line, 0);
  }
}

TEST(OverridesTest, OverrideIntoAScalarIsAnError) {
  Loaded l = load("name: x\n", {"name.x=1"});
  EXPECT_FALSE(l.recipe);
  const Diagnostic* d = find_diag(l.diags, "bad-override", "name.x");
  ASSERT_NE(d, nullptr) << dump(l.diags);
  EXPECT_THAT(d->message, HasSubstr("`name` is not a section"));
  Loaded list =
      load("name: x\nmodel:\n  recompute_modules: [a]\n", {"model.recompute_modules.x=1"});
  EXPECT_NE(find_diag(list.diags, "bad-override"), nullptr);
}

TEST(OverridesTest, InvalidYamlValue) {
  Loaded l = load("name: x\n", {"model.recompute_modules=[a,"});
  EXPECT_FALSE(l.recipe);
  const Diagnostic* d = find_diag(l.diags, "bad-override");
  ASSERT_NE(d, nullptr) << dump(l.diags);
  EXPECT_THAT(d->message, HasSubstr("not a YAML scalar or list"));
  EXPECT_EQ(d->loc.override_arg, "model.recompute_modules=[a,");
}

TEST(OverridesTest, ValueMayContainEqualsSigns) {
  Loaded l = load("name: x\n", {"env.OPTS=a=b=c", "executor.slurm.dependency=afterok:1"});
  ASSERT_TRUE(l.recipe) << dump(l.diags);
  ASSERT_EQ(l.recipe->env.size(), 1u);
  EXPECT_EQ(l.recipe->env[0].value, "a=b=c");
  EXPECT_EQ(l.recipe->executor.slurm.dependency.value, "afterok:1");
}

TEST(OverridesTest, AllOverrideErrorsAreCollected) {
  Loaded l = load("name: x\n", {"=3", "model.num_layers=", "name.x=1"});
  EXPECT_FALSE(l.recipe);
  EXPECT_EQ(l.diags.count(Severity::kError), 3u) << dump(l.diags);
}

TEST(OverridesTest, ApplyOverrideOnAnEmptyDocument) {
  YamlNode root;  // null document
  Diagnostics diags;
  apply_override(root, "cluster.num_gpus=16", diags);
  EXPECT_FALSE(diags.has_errors());
  ASSERT_TRUE(root.is_map());
  const YamlNode* cluster = root.find("cluster");
  ASSERT_NE(cluster, nullptr);
  const YamlNode* ng = cluster->find("num_gpus");
  ASSERT_NE(ng, nullptr);
  EXPECT_EQ(ng->scalar, "16");
  EXPECT_EQ(ng->loc.override_arg, "cluster.num_gpus=16");
  EXPECT_EQ(root.entries[0].key_loc.override_arg, "cluster.num_gpus=16");
}

}  // namespace
}  // namespace bridge

namespace bridge {
namespace {

// The registry's knobs come from the load itself (no second parse at submit time), so they
// must be exactly what flatten_recipe_inputs reads from the file with the same overrides.
TEST(RecipeLoaderTest, InputsAreTheFlattenedRecipeAfterOverrides) {
  test::TempDir tmp;
  std::string path = tmp.write("inputs.yaml",
                               "name: knobs\ndescription: left out\n"
                               "cluster: {num_gpus: 8, gpus_per_node: 8}\n"
                               "model: {tensor_model_parallel_size: 2}\n"
                               "runtime: {command: [python, train.py]}\n");
  std::vector<std::string> overrides{"model.tensor_model_parallel_size=4",
                                     "comm_overlap.overlap_grad_reduce=false"};
  Diagnostics diags;
  auto recipe = load_recipe(path, overrides, diags);
  ASSERT_TRUE(recipe) << diags.items().size();
  EXPECT_EQ(recipe->inputs, flatten_recipe_inputs(path, overrides));
  EXPECT_EQ(recipe->inputs.at("model.tensor_model_parallel_size"), "4");
  EXPECT_EQ(recipe->inputs.at("comm_overlap.overlap_grad_reduce"), "false");
  EXPECT_EQ(recipe->inputs.at("runtime.command"), "[python,train.py]");
  EXPECT_EQ(recipe->inputs.count("name"), 0u);
  EXPECT_EQ(recipe->inputs.count("description"), 0u);
}

}  // namespace
}  // namespace bridge
