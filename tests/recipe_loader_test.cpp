// Recipe loading (recipe.md): schema, types, unknown keys, error collection and positions,
// hostile YAML, and KEY=VALUE overrides (cli.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "launcher/recipe_loader.h"
#include "launcher/yaml_tree.h"
#include "tests/test_util.h"

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

// The first diagnostic with `code` (and `path` when given), or nullptr.
const Diagnostic* find_diag(const Diagnostics& diags, const std::string& code,
                            const std::string& path = "") {
  for (const auto& d : diags.items())
    if (d.code == code && (path.empty() || d.path == path)) return &d;
  return nullptr;
}

std::string dump(const Diagnostics& diags) {
  std::string s;
  for (const auto& d : diags.items()) s += format_diagnostic(d, false);
  return s;
}

// 1-based line and column just after the first occurrence of `needle` in `text`: where the
// value written after "key: " starts.
std::pair<int, int> pos_after(const std::string& text, const std::string& needle) {
  size_t at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  at += needle.size();
  int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'));
  size_t line_start = text.rfind('\n', at == 0 ? 0 : at - 1);
  line_start = line_start == std::string::npos ? 0 : line_start + 1;
  return {line, static_cast<int>(at - line_start) + 1};
}

void expect_at(const SourceLoc& loc, std::pair<int, int> pos, const std::string& file) {
  EXPECT_EQ(loc.file, file);
  EXPECT_EQ(loc.line, pos.first);
  EXPECT_EQ(loc.column, pos.second);
  EXPECT_FALSE(loc.from_override());
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
  EXPECT_FALSE(m.virtual_pipeline_model_parallel_size.is_set());  // null = unset
  EXPECT_EQ(m.context_parallel_size.value, 1);
  EXPECT_EQ(m.expert_model_parallel_size.value, 16);
  EXPECT_FALSE(m.expert_tensor_parallel_size.is_set());
  EXPECT_EQ(m.sequence_parallel.value, false);
  EXPECT_EQ(m.num_layers.value, 48);
  EXPECT_EQ(m.hidden_size.value, 2048);
  EXPECT_EQ(m.num_attention_heads.value, 32);
  EXPECT_EQ(m.num_moe_experts.value, 128);
  EXPECT_EQ(m.moe_token_dispatcher_type.value, "alltoall");
  EXPECT_FALSE(m.moe_flex_dispatcher_backend.is_set());
  EXPECT_EQ(m.moe_shared_expert_overlap.value, false);
  EXPECT_FALSE(m.moe_shared_expert_intermediate_size.is_set());
  EXPECT_EQ(m.moe_permute_fusion.value, false);
  EXPECT_FALSE(m.mtp_num_layers.is_set());
  EXPECT_EQ(m.precision.value, "bf16");
  EXPECT_EQ(m.compute_dtype.value, "bf16");
  EXPECT_EQ(m.recompute_granularity.value, "selective");
  EXPECT_FALSE(m.recompute_method.is_set());
  EXPECT_FALSE(m.recompute_num_layers.is_set());
  EXPECT_EQ(m.recompute_modules.value, StringList{"core_attn"});
  EXPECT_EQ(m.gradient_accumulation_fusion.value, true);
  EXPECT_EQ(m.add_bias_linear.value, false);
  EXPECT_EQ(m.add_qkv_bias.value, false);
  EXPECT_EQ(m.cuda_graph_impl.value, "none");
  ASSERT_TRUE(m.cuda_graph_scope.is_set());  // [] is set (to an empty list), not null
  EXPECT_THAT(*m.cuda_graph_scope.value, IsEmpty());
  EXPECT_EQ(m.overlap_moe_expert_parallel_comm.value, false);

  const CommOverlapSpec& c = r->comm_overlap;
  EXPECT_EQ(c.tp_comm_overlap.value, false);
  EXPECT_FALSE(c.tp_comm_overlap_cfg.is_set());
  EXPECT_EQ(c.tp_comm_bootstrap_backend.value, "nccl");
  EXPECT_FALSE(c.overlap_p2p_comm.is_set());
  EXPECT_FALSE(c.batch_p2p_comm.is_set());
  EXPECT_FALSE(c.overlap_grad_reduce.is_set());
  EXPECT_FALSE(c.overlap_param_gather.is_set());
  EXPECT_FALSE(c.overlap_param_gather_with_optimizer_step.is_set());
  EXPECT_FALSE(c.align_param_gather.is_set());
  EXPECT_FALSE(c.bucket_size.is_set());
  EXPECT_FALSE(c.defer_embedding_wgrad_compute.is_set());
  EXPECT_FALSE(c.wgrad_deferral_limit.is_set());
  EXPECT_EQ(c.overlap_moe_expert_parallel_comm.value, true);
  EXPECT_EQ(c.delay_wgrad_compute.value, false);

  EXPECT_EQ(r->ddp.use_distributed_optimizer.value, true);
  EXPECT_FALSE(r->ddp.overlap_grad_reduce.is_set());
  EXPECT_FALSE(r->ddp.bucket_size.is_set());
  EXPECT_FALSE(r->optimizer.overlap_param_gather_with_optimizer_step.is_set());
  EXPECT_EQ(r->mixed_precision.grad_reduce_in_fp32.value, false);
  EXPECT_EQ(r->mixed_precision.fp8_param_gather.value, false);
  EXPECT_EQ(r->train.global_batch_size.value, 1024);
  EXPECT_EQ(r->train.micro_batch_size.value, 1);
  EXPECT_EQ(r->train.max_steps.value, 8);

  const RuntimeSpec& rt = r->runtime;
  EXPECT_EQ(rt.launcher.value, "srun");
  EXPECT_EQ(rt.command.value,
            (StringList{"python", "/opt/Megatron-Bridge/scripts/performance/run_script.py"}));
  EXPECT_EQ(rt.args.value,
            (StringList{"-m", "qwen", "-mr", "qwen3_30b_a3b", "--task", "pretrain"}));
  EXPECT_EQ(rt.pass_overrides.value, true);
  EXPECT_EQ(rt.container_image.value, "nvcr.io/nvidia/nemo:25.11");
  EXPECT_FALSE(rt.workdir.is_set());
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
  expect_at(r->plugins[1].loc, pos_after(text, "\n  "), path);  // perf_env's line is first...
  ASSERT_EQ(r->env.size(), 1u);
  EXPECT_EQ(r->env[0].name, "NCCL_DEBUG");
  EXPECT_EQ(r->env[0].value, "WARN");
  EXPECT_FALSE(r->env[0].secret);
  EXPECT_FALSE(r->env[0].expand);

  const ExecutorSpec& x = r->executor;
  EXPECT_EQ(x.default_executor.value, "slurm");
  EXPECT_EQ(x.slurm.account.value, "my-account");
  EXPECT_EQ(x.slurm.partition.value, "batch");
  EXPECT_EQ(x.slurm.time.value, "00:30:00");
  EXPECT_EQ(x.slurm.container_mounts.value, StringList{"/lustre:/lustre"});
  EXPECT_EQ(x.slurm.exclusive.value, true);
  EXPECT_EQ(x.slurm.job_dir.value, "~/bridge-launch/jobs");  // expanded at plan time, not here
  EXPECT_EQ(x.kubernetes.namespace_.value, "training");
  EXPECT_EQ(x.kubernetes.api.value, "jobset");
  EXPECT_THAT(r->overrides, IsEmpty());

  // Locations point at the value: file, 1-based line and column.
  expect_at(m.num_layers.loc, pos_after(text, "  num_layers: "), path);
  expect_at(m.expert_model_parallel_size.loc, pos_after(text, "  expert_model_parallel_size: "),
            path);
  expect_at(c.overlap_moe_expert_parallel_comm.loc,
            pos_after(text, "comm_overlap:"),  // placeholder, replaced below
            path);
}

}  // namespace
}  // namespace bridge
