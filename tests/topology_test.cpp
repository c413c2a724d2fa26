// Topology rules T1-T6 (docs/overlap.md): the layout, dp and nodes computed from a recipe.
#include "model/topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "model/recipe_loader.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

struct Result {
  std::optional<Topology> topology;
  Diagnostics diags;
};

std::string dump(const Diagnostics& diags) {
  std::string s;
  for (const auto& d : diags.items()) s += format_diagnostic(d, false);
  return s;
}

// Loads "name: t\n" + `body` (which must be valid for the loader) and computes the topology.
Result topo(const std::string& body, const std::vector<std::string>& overrides = {}) {
  Result res;
  auto recipe = load_recipe_text("name: t\n" + body, "t.yaml", overrides, res.diags);
  EXPECT_TRUE(recipe) << dump(res.diags);
  if (recipe) res.topology = compute_topology(*recipe, res.diags);
  return res;
}

using test::find_diag;

TEST(TopologyTest, DefaultsAreOneGpu) {
  Result r = topo("");
  ASSERT_TRUE(r.topology) << dump(r.diags);
  const Topology& t = *r.topology;
  EXPECT_EQ(t.gpu, "");
  EXPECT_EQ(t.num_gpus, 1);
  EXPECT_EQ(t.gpus_per_node, 1);
  EXPECT_EQ(t.nodes, 1);
  EXPECT_EQ(t.tp, 1);
  EXPECT_EQ(t.pp, 1);
  EXPECT_FALSE(t.vpp);
  EXPECT_EQ(t.vp(), 1);
  EXPECT_EQ(t.cp, 1);
  EXPECT_EQ(t.ep, 1);
  EXPECT_EQ(t.etp, 1);
  EXPECT_EQ(t.dp, 1);
  EXPECT_THAT(r.diags.items(), IsEmpty());
}

TEST(TopologyTest, NodesAndDpComputed) {
  Result r = topo(
      "cluster: {gpu: H100, num_gpus: 16, gpus_per_node: 8}\n"
      "model: {tensor_model_parallel_size: 2, pipeline_model_parallel_size: 2,\n"
      "        virtual_pipeline_model_parallel_size: 2, num_layers: 8}\n");
  ASSERT_TRUE(r.topology) << dump(r.diags);
  const Topology& t = *r.topology;
  EXPECT_EQ(t.gpu, "h100");  // lower-cased
  EXPECT_EQ(t.num_gpus, 16);
  EXPECT_EQ(t.gpus_per_node, 8);
  EXPECT_EQ(t.nodes, 2);
  EXPECT_EQ(t.tp, 2);
  EXPECT_EQ(t.pp, 2);
  EXPECT_EQ(t.vpp, 2);
  EXPECT_EQ(t.vp(), 2);
  EXPECT_EQ(t.dp, 4);  // 16 / (2*2*1)

  Result cp = topo(
      "cluster: {num_gpus: 64, gpus_per_node: 8}\n"
      "model: {tensor_model_parallel_size: 4, context_parallel_size: 2}\n");
  ASSERT_TRUE(cp.topology) << dump(cp.diags);
  EXPECT_EQ(cp.topology->nodes, 8);
  EXPECT_EQ(cp.topology->cp, 2);
  EXPECT_EQ(cp.topology->dp, 8);  // 64 / (4*1*2)
}

TEST(TopologyTest, GpusPerNodeDefaultsToAtMostEight) {
  Result big = topo("cluster: {num_gpus: 32}\n");
  ASSERT_TRUE(big.topology) << dump(big.diags);
  EXPECT_EQ(big.topology->gpus_per_node, 8);
  EXPECT_EQ(big.topology->nodes, 4);
  Result small = topo("cluster: {num_gpus: 4}\n");
  ASSERT_TRUE(small.topology) << dump(small.diags);
  EXPECT_EQ(small.topology->gpus_per_node, 4);
  EXPECT_EQ(small.topology->nodes, 1);
}

TEST(TopologyTest, EtpDefaultsToTp) {
  Result r = topo(
      "cluster: {num_gpus: 16}\n"
      "model: {tensor_model_parallel_size: 2, expert_model_parallel_size: 8,\n"
      "        num_moe_experts: 64}\n");
  ASSERT_TRUE(r.topology) << dump(r.diags);
  EXPECT_EQ(r.topology->etp, 2);
  EXPECT_EQ(r.topology->ep, 8);
  Result explicit_etp = topo(
      "cluster: {num_gpus: 16}\n"
      "model: {tensor_model_parallel_size: 2, "
      "expert_tensor_parallel_size: 1, expert_model_parallel_size: 16,\n"
      "        num_moe_experts: 64}\n");
  ASSERT_TRUE(explicit_etp.topology) << dump(explicit_etp.diags);
  EXPECT_EQ(explicit_etp.topology->etp, 1);
}

// T7: Megatron refuses a global batch that micro-batches of every data-parallel rank cannot
// split evenly; the job would fail after queueing.
TEST(TopologyTest, T7GlobalBatchMustBeAMultipleOfMicroBatchTimesDp) {
  Result r = topo(
      "cluster: {num_gpus: 8, gpus_per_node: 8}\n"
      "model: {tensor_model_parallel_size: 2}\n"
      "train: {global_batch_size: 12, micro_batch_size: 2}\n");
  EXPECT_FALSE(r.topology);
  const Diagnostic* d = find_diag(r.diags, "batch-not-divisible");
  ASSERT_NE(d, nullptr) << dump(r.diags);
  EXPECT_EQ(d->path, "train.global_batch_size");
  EXPECT_THAT(d->message, HasSubstr("global_batch_size (12) is not a multiple of "
                                    "micro_batch_size * dp = 2*4 = 8"));
  EXPECT_THAT(d->help, HasSubstr("a multiple of 8 (e.g. 16)"));
  EXPECT_EQ(d->loc.line, 4);  // after the `name:` line topo() writes
  EXPECT_TRUE(topo("cluster: {num_gpus: 8, gpus_per_node: 8}\n"
                   "model: {tensor_model_parallel_size: 2}\n"
                   "train: {global_batch_size: 16, micro_batch_size: 2}\n")
                  .topology);
  // Only the global batch set: the runtime's micro batch decides, nothing to check here.
  EXPECT_TRUE(
      topo("cluster: {num_gpus: 8, gpus_per_node: 8}\ntrain: {global_batch_size: 12}\n").topology);
}

TEST(TopologyTest, T1NumGpusMustBeAMultipleOfGpusPerNode) {
  Result r = topo("cluster:\n  num_gpus: 12\n  gpus_per_node: 8\n");
  EXPECT_FALSE(r.topology);
  const Diagnostic* d = find_diag(r.diags, "gpus-not-multiple-of-node");
  ASSERT_NE(d, nullptr) << dump(r.diags);
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_EQ(d->path, "cluster.num_gpus");
  EXPECT_THAT(d->message, HasSubstr("num_gpus (12) is not a multiple of gpus_per_node (8)"));
  EXPECT_THAT(d->help, HasSubstr("-ng 16"));
  EXPECT_EQ(d->loc.file, "t.yaml");
  EXPECT_EQ(d->loc.line, 3);
  EXPECT_EQ(d->loc.column, 13);

  Result fewer = topo("cluster: {num_gpus: 4, gpus_per_node: 8}\n");
  EXPECT_FALSE(fewer.topology);
  EXPECT_NE(find_diag(fewer.diags, "gpus-not-multiple-of-node"), nullptr);
}

TEST(TopologyTest, T1FromCommandLineNamesTheOverride) {
  Result r = topo("", {"cluster.num_gpus=12", "cluster.gpus_per_node=8"});
  EXPECT_FALSE(r.topology);
  const Diagnostic* d = find_diag(r.diags, "gpus-not-multiple-of-node");
  ASSERT_NE(d, nullptr) << dump(r.diags);
  EXPECT_EQ(d->loc.line, 0);
  EXPECT_EQ(d->loc.override_arg, "cluster.num_gpus=12");
}

TEST(TopologyTest, T2DpMustBeIntegral) {
  Result r = topo(
      "cluster: {num_gpus: 16, gpus_per_node: 8}\n"
      "model: {tensor_model_parallel_size: 3}\n");
  EXPECT_FALSE(r.topology);
  const Diagnostic* d = find_diag(r.diags, "dp-not-integral");
  ASSERT_NE(d, nullptr) << dump(r.diags);
  EXPECT_EQ(d->path, "cluster.num_gpus");
  EXPECT_THAT(d->message, HasSubstr("tp*pp*cp = 3*1*1 = 3"));
  EXPECT_EQ(d->loc.line, 2);

  // Model parallelism larger than the job: dp would be < 1.
  Result too_big = topo(
      "cluster: {num_gpus: 8}\n"
      "model: {tensor_model_parallel_size: 4, pipeline_model_parallel_size: 4}\n");
  EXPECT_FALSE(too_big.topology);
  EXPECT_NE(find_diag(too_big.diags, "dp-not-integral"), nullptr);

  Result with_cp = topo(
      "cluster: {num_gpus: 16}\n"
      "model: {tensor_model_parallel_size: 2, context_parallel_size: 3}\n");
  EXPECT_FALSE(with_cp.topology);
  EXPECT_NE(find_diag(with_cp.diags, "dp-not-integral"), nullptr);
}

TEST(TopologyTest, T3ExpertGroupMustDivideGpus) {
  Result r = topo(
      "cluster: {num_gpus: 16}\n"
      "model:\n  expert_model_parallel_size: 32\n  num_moe_experts: 64\n");
  EXPECT_FALSE(r.topology);
  const Diagnostic* d = find_diag(r.diags, "ep-not-integral");
  ASSERT_NE(d, nullptr) << dump(r.diags);
  EXPECT_EQ(d->path, "model.expert_model_parallel_size");
  EXPECT_THAT(d->message, HasSubstr("etp*ep*pp = 1*32*1 = 32"));
  EXPECT_EQ(d->loc.line, 4);
  EXPECT_EQ(d->loc.column, 31);

  // etp defaults to tp: tp=2, ep=16 needs 32 GPUs.
  Result etp = topo(
      "cluster: {num_gpus: 16}\n"
      "model: {tensor_model_parallel_size: 2, expert_model_parallel_size: 16,\n"
      "        num_moe_experts: 64}\n");
  EXPECT_FALSE(etp.topology);
  const Diagnostic* e = find_diag(etp.diags, "ep-not-integral");
  ASSERT_NE(e, nullptr) << dump(etp.diags);
  EXPECT_THAT(e->message, HasSubstr("2*16*1 = 32"));
}

TEST(TopologyTest, T3ExpertsMustBeAMultipleOfEp) {
  Result r = topo(
      "cluster: {num_gpus: 16}\n"
      "model:\n  expert_model_parallel_size: 4\n  num_moe_experts: 10\n");
  EXPECT_FALSE(r.topology);
  const Diagnostic* d = find_diag(r.diags, "experts-not-multiple-of-ep");
  ASSERT_NE(d, nullptr) << dump(r.diags);
  EXPECT_EQ(d->path, "model.num_moe_experts");
  EXPECT_THAT(d->message, HasSubstr("num_moe_experts (10)"));
  EXPECT_EQ(d->loc.line, 5);
}

TEST(TopologyTest, T3OnlyAppliesToMoe) {
  Result r = topo("cluster: {num_gpus: 16}\nmodel: {expert_model_parallel_size: 32}\n");
  EXPECT_TRUE(r.topology) << dump(r.diags);
}

TEST(TopologyTest, T4HeadsMustBeAMultipleOfTp) {
  Result r = topo(
      "cluster: {num_gpus: 8}\n"
      "model:\n  tensor_model_parallel_size: 4\n  num_attention_heads: 30\n");
  EXPECT_FALSE(r.topology);
  const Diagnostic* d = find_diag(r.diags, "heads-not-multiple-of-tp");
  ASSERT_NE(d, nullptr) << dump(r.diags);
  EXPECT_EQ(d->path, "model.num_attention_heads");
  EXPECT_THAT(d->message, HasSubstr("num_attention_heads (30) is not a multiple of tp (4)"));
  EXPECT_EQ(d->loc.line, 5);
  EXPECT_EQ(d->loc.column, 24);
  EXPECT_TRUE(topo("cluster: {num_gpus: 8}\nmodel: {tensor_model_parallel_size: 4}\n").topology);
}

TEST(TopologyTest, T5LayersMustBeAMultipleOfPipelineStages) {
  Result r = topo(
      "cluster: {num_gpus: 8}\n"
      "model:\n  pipeline_model_parallel_size: 4\n  num_layers: 30\n");
  EXPECT_FALSE(r.topology);
  const Diagnostic* d = find_diag(r.diags, "layers-not-multiple-of-pp");
  ASSERT_NE(d, nullptr) << dump(r.diags);
  EXPECT_THAT(d->message, HasSubstr("num_layers (30) is not a multiple of pp (4)"));
  EXPECT_EQ(d->loc.line, 5);

  Result vpp = topo(
      "cluster: {num_gpus: 8}\n"
      "model: {pipeline_model_parallel_size: 4,\n"
      "        virtual_pipeline_model_parallel_size: 3, num_layers: 16}\n");
  EXPECT_FALSE(vpp.topology);
  const Diagnostic* v = find_diag(vpp.diags, "layers-not-multiple-of-pp");
  ASSERT_NE(v, nullptr) << dump(vpp.diags);
  EXPECT_THAT(v->message, HasSubstr("pp*vpp = 4*3 = 12"));

  Result ok = topo(
      "cluster: {num_gpus: 8}\n"
      "model: {pipeline_model_parallel_size: 4,\n"
      "        virtual_pipeline_model_parallel_size: 3, num_layers: 24}\n");
  ASSERT_TRUE(ok.topology) << dump(ok.diags);
  EXPECT_EQ(ok.topology->dp, 2);
}

TEST(TopologyTest, T6VppRequiresPipelineParallelism) {
  Result r = topo(
      "cluster: {num_gpus: 8}\n"
      "model:\n  virtual_pipeline_model_parallel_size: 2\n");
  EXPECT_FALSE(r.topology);
  const Diagnostic* d = find_diag(r.diags, "vpp-without-pp");
  ASSERT_NE(d, nullptr) << dump(r.diags);
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_EQ(d->path, "model.virtual_pipeline_model_parallel_size");
  EXPECT_EQ(d->loc.line, 4);
}

TEST(TopologyTest, T6SequenceParallelWithoutTpIsAWarning) {
  Result r = topo("cluster: {num_gpus: 8}\nmodel:\n  sequence_parallel: true\n");
  ASSERT_TRUE(r.topology) << dump(r.diags);  // only a warning
  ASSERT_EQ(r.diags.items().size(), 1u);
  const Diagnostic& d = r.diags.items()[0];
  EXPECT_EQ(d.severity, Severity::kWarning);
  EXPECT_EQ(d.code, "sequence-parallel-without-tp");
  EXPECT_EQ(d.path, "model.sequence_parallel");
  EXPECT_THAT(d.message, HasSubstr("no effect"));
  EXPECT_EQ(d.loc.line, 4);

  Result with_tp = topo(
      "cluster: {num_gpus: 8}\n"
      "model: {sequence_parallel: true, tensor_model_parallel_size: 2}\n");
  ASSERT_TRUE(with_tp.topology);
  EXPECT_THAT(with_tp.diags.items(), IsEmpty());
}

TEST(TopologyTest, AllViolationsAreReported) {
  Result r = topo(
      "cluster: {num_gpus: 12, gpus_per_node: 8}\n"
      "model:\n"
      "  tensor_model_parallel_size: 5\n"
      "  num_attention_heads: 32\n"
      "  num_layers: 10\n"
      "  pipeline_model_parallel_size: 1\n"
      "  virtual_pipeline_model_parallel_size: 4\n"
      "  sequence_parallel: true\n"
      "  expert_model_parallel_size: 3\n"
      "  num_moe_experts: 8\n");
  EXPECT_FALSE(r.topology);
  for (const char* code : {"gpus-not-multiple-of-node", "dp-not-integral", "ep-not-integral",
                           "experts-not-multiple-of-ep", "heads-not-multiple-of-tp",
                           "layers-not-multiple-of-pp", "vpp-without-pp"})
    EXPECT_TRUE(r.diags.has_code(code)) << code << "\n" << dump(r.diags);
  EXPECT_FALSE(r.diags.has_code("sequence-parallel-without-tp"));  // tp is 5
}

TEST(TopologyTest, ExistingErrorsInDiagnosticsDoNotFailAValidLayout) {
  Result r = topo("cluster: {num_gpus: 8}\n");
  ASSERT_TRUE(r.topology);
  Diagnostics diags;
  diags.error("earlier", "", {}, "an earlier stage failed");
  Recipe recipe;
  recipe.cluster.num_gpus.value = 8;
  EXPECT_TRUE(compute_topology(recipe, diags));
}

}  // namespace
}  // namespace bridge
