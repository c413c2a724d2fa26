// perf_env: one test per rule of the perf_env section of the plugins spec.
#include <gtest/gtest.h>

#include "tests/support/plugin_testing.h"

namespace bridge {
namespace {

using testing::make_topology;
using testing::PluginHarness;

constexpr const char* kPerfEnv = "plugins:\n  perf_env: {}\n";

std::string cdmc(PluginHarness& h) {
  h.run();
  EXPECT_FALSE(h.diags.has_errors());
  return h.env("CUDA_DEVICE_MAX_CONNECTIONS");
}

TEST(PerfEnvMaxConnections, H100Tp4Is1) {
  PluginHarness h(kPerfEnv);
  h.topo = make_topology("h100", 8, /*tp=*/4);
  EXPECT_EQ(cdmc(h), "1");
  EXPECT_NE(h.var("CUDA_DEVICE_MAX_CONNECTIONS")->reason.find("host launch order"),
            std::string::npos);
}

TEST(PerfEnvMaxConnections, H100Tp2WithA2aOverlapIs8) {
  PluginHarness h(kPerfEnv);
  h.topo = make_topology("h100", 8, /*tp=*/2, 1, 1, /*ep=*/4);
  h.set_a2a_overlap(true);
  EXPECT_EQ(cdmc(h), "8");
}

TEST(PerfEnvMaxConnections, DeepepWithoutModelParallelismIs32) {
  PluginHarness h(kPerfEnv + std::string("model: {moe_token_dispatcher_type: flex, "
                                         "moe_flex_dispatcher_backend: deepep}\n"));
  h.topo = make_topology("h100", 8, 1, 1, 1, /*ep=*/8);
  EXPECT_EQ(cdmc(h), "32");
  EXPECT_NE(h.var("CUDA_DEVICE_MAX_CONNECTIONS")->reason.find("serialization"), std::string::npos);
}

TEST(PerfEnvMaxConnections, B200Tp2Cp2Pp2Ng16Is32) {
  PluginHarness h(kPerfEnv);
  h.topo = make_topology("b200", 16, /*tp=*/2, /*pp=*/2, /*cp=*/2);
  ASSERT_EQ(h.topo.dp, 2);
  EXPECT_EQ(cdmc(h), "32");
}

TEST(PerfEnvMaxConnections, B200Tp8Ng8Is8) {
  PluginHarness h(kPerfEnv);
  h.topo = make_topology("b200", 8, /*tp=*/8);
  ASSERT_EQ(h.topo.dp, 1);
  EXPECT_EQ(cdmc(h), "8");
}

TEST(PerfEnvMaxConnections, DefaultsAre8) {
  PluginHarness h(kPerfEnv);
  EXPECT_EQ(cdmc(h), "8");
}

TEST(PerfEnvMaxConnections, A2aOverlapIsTheResolvedValueNotTheRecipeFlag) {
  // The recipe asks for EP overlap, but the resolved config turned it off: Hopper rule -> 1.
  PluginHarness h(kPerfEnv + std::string("model: {overlap_moe_expert_parallel_comm: true}\n"));
  h.topo = make_topology("h100", 8, /*tp=*/2, 1, 1, /*ep=*/4);
  h.set_a2a_overlap(false);
  EXPECT_EQ(cdmc(h), "1");
}

TEST(PerfEnvFlexBackend, CountsOnlyWhenDispatcherIsFlex) {
  PluginHarness h(kPerfEnv + std::string("model: {moe_token_dispatcher_type: alltoall, "
                                         "moe_flex_dispatcher_backend: deepep}\n"));
  h.topo = make_topology("h100", 8, 1, 1, 1, /*ep=*/8);
  EXPECT_EQ(cdmc(h), "8");
  EXPECT_EQ(h.env("NVTE_FWD_LAYERNORM_SM_MARGIN"), "16");
}

TEST(PerfEnvMargin, DefaultIs16) {
  PluginHarness h(kPerfEnv);
  h.run();
  EXPECT_EQ(h.env("NVTE_FWD_LAYERNORM_SM_MARGIN"), "16");
  EXPECT_EQ(h.env("NVTE_BWD_LAYERNORM_SM_MARGIN"), "16");
}

TEST(PerfEnvMargin, Is20WithHybridepBackend) {
  PluginHarness h(kPerfEnv + std::string("model: {moe_token_dispatcher_type: flex, "
                                         "moe_flex_dispatcher_backend: hybridep}\n"));
  h.topo = make_topology("h100", 8, 1, 1, 1, /*ep=*/8);
  h.run();
  EXPECT_EQ(h.env("NVTE_FWD_LAYERNORM_SM_MARGIN"), "20");
  EXPECT_EQ(h.env("NVTE_BWD_LAYERNORM_SM_MARGIN"), "20");
}

TEST(PerfEnvMargin, ExplicitValueWins) {
  PluginHarness h(
      "plugins:\n  perf_env: {layernorm_sm_margin: 24}\n"
      "model: {moe_token_dispatcher_type: flex, moe_flex_dispatcher_backend: deepep}\n");
  h.run();
  EXPECT_EQ(h.env("NVTE_FWD_LAYERNORM_SM_MARGIN"), "24");
  EXPECT_EQ(h.env("NVTE_BWD_LAYERNORM_SM_MARGIN"), "24");
}

TEST(PerfEnvMargin, DisabledSetsNothing) {
  PluginHarness h("plugins:\n  perf_env: {enable_layernorm_sm_margin: false}\n");
  h.run();
  EXPECT_EQ(h.env("NVTE_FWD_LAYERNORM_SM_MARGIN"), "<unset>");
  EXPECT_EQ(h.env("NVTE_BWD_LAYERNORM_SM_MARGIN"), "<unset>");
}

TEST(PerfEnvChunksize, SetOnlyWithPipelineParallelism) {
  const std::string yaml = "plugins:\n  perf_env: {nccl_pp_comm_chunksize: 2097152}\n";
  PluginHarness pp2(yaml);
  pp2.topo = make_topology("h100", 16, 1, /*pp=*/2);
  pp2.run();
  EXPECT_EQ(pp2.env("NCCL_P2P_NET_CHUNKSIZE"), "2097152");

  PluginHarness pp1(yaml);
  pp1.run();
  EXPECT_EQ(pp1.env("NCCL_P2P_NET_CHUNKSIZE"), "<unset>");
  EXPECT_FALSE(pp1.diags.has_errors());
}

TEST(PerfEnvChunksize, OneOrLessIsAValidationError) {
  PluginHarness h("plugins:\n  perf_env:\n    nccl_pp_comm_chunksize: 1\n");
  h.topo = make_topology("h100", 16, 1, /*pp=*/2);
  h.run();
  const Diagnostic* d = h.diag("out-of-range");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->path, "plugins.perf_env.nccl_pp_comm_chunksize");
  EXPECT_EQ(d->loc.line, 4);
  EXPECT_EQ(h.env("NCCL_P2P_NET_CHUNKSIZE"), "<unset>");
}

const char* kHybridep =
    "plugins:\n  perf_env: {}\n"
    "model: {moe_token_dispatcher_type: flex, moe_flex_dispatcher_backend: hybridep, "
    "expert_model_parallel_size: 144}\n";

TEST(PerfEnvHybridep, Nvlink8CapsRanksPerDomainAt8) {
  PluginHarness h(kHybridep);
  h.topo = make_topology("h100", 16, 1, 1, 1, /*ep=*/16);
  h.run();
  EXPECT_EQ(h.env("NVLINK_DOMAIN_SIZE"), "8");
  EXPECT_EQ(h.env("USE_MNNVL"), "0");
  EXPECT_EQ(h.env("NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN"), "8");

  PluginHarness small(kHybridep);
  small.topo = make_topology("b200", 8, 1, 1, 1, /*ep=*/4);
  small.run();
  EXPECT_EQ(small.env("NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN"), "4");
}

TEST(PerfEnvHybridep, Nvlink72UsesEpAndMnnvl) {
  PluginHarness h(kHybridep);
  h.topo = make_topology("gb200", 64, 1, 1, 1, /*ep=*/64);
  h.run();
  EXPECT_FALSE(h.diags.has_errors());
  EXPECT_EQ(h.env("NVLINK_DOMAIN_SIZE"), "72");
  EXPECT_EQ(h.env("USE_MNNVL"), "1");
  EXPECT_EQ(h.env("NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN"), "64");
}

TEST(PerfEnvHybridep, Nvlink72RejectsEpAbove72) {
  PluginHarness h(kHybridep);
  h.topo = make_topology("gb300", 144, 1, 1, 1, /*ep=*/144);
  h.run();
  const Diagnostic* d = h.diag("hybridep-ep-too-large");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_EQ(d->path, "model.expert_model_parallel_size");
  EXPECT_EQ(d->loc.line, 4);
  EXPECT_EQ(h.env("NVLINK_DOMAIN_SIZE"), "<unset>");
}

TEST(PerfEnvDeterministic, SetsThreeVariablesAndWarnsAboutTpOverlap) {
  PluginHarness h("plugins:\n  perf_env: {deterministic: true}\n");
  h.topo = make_topology("h100", 8, /*tp=*/4);
  h.set_tp_overlap(true);
  h.run();
  EXPECT_EQ(h.env("NCCL_ALGO"), "Ring");
  EXPECT_EQ(h.env("NVTE_ALLOW_NONDETERMINISTIC_ALGO"), "0");
  EXPECT_EQ(h.env("CUBLAS_WORKSPACE_CONFIG"), ":4096:8");
  const Diagnostic* d = h.diag("deterministic-tp-overlap");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->severity, Severity::kWarning);
  EXPECT_EQ(d->path, "plugins.perf_env.deterministic");
}

TEST(PerfEnvDeterministic, OffByDefault) {
  PluginHarness h(kPerfEnv);
  h.run();
  EXPECT_EQ(h.env("NCCL_ALGO"), "<unset>");
  EXPECT_EQ(h.env("CUBLAS_WORKSPACE_CONFIG"), "<unset>");
  EXPECT_EQ(h.diag("deterministic-tp-overlap"), nullptr);
}

TEST(PerfEnvNvfp4, SetsFastMath) {
  PluginHarness h(kPerfEnv + std::string("model: {compute_dtype: nvfp4}\n"));
  h.run();
  EXPECT_EQ(h.env("NVTE_USE_FAST_MATH"), "1");
  PluginHarness bf16(kPerfEnv + std::string("model: {compute_dtype: bf16}\n"));
  bf16.run();
  EXPECT_EQ(bf16.env("NVTE_USE_FAST_MATH"), "<unset>");
}

TEST(PerfEnvManualGc, DefaultArgs) {
  PluginHarness h(kPerfEnv);
  h.run();
  EXPECT_EQ(h.args(),
            (std::vector<std::string>{"train.manual_gc=true", "train.manual_gc_interval=100"}));
}

TEST(PerfEnvManualGc, CustomInterval) {
  PluginHarness h("plugins:\n  perf_env: {manual_gc_interval: 250}\n");
  h.run();
  EXPECT_EQ(h.args(),
            (std::vector<std::string>{"train.manual_gc=true", "train.manual_gc_interval=250"}));
  EXPECT_EQ(h.out.runtime_args[1].source, "plugin:perf_env");
}

TEST(PerfEnvManualGc, DisabledEmitsNoArgs) {
  PluginHarness h("plugins:\n  perf_env: {enable_manual_gc: false}\n");
  h.run();
  EXPECT_TRUE(h.args().empty());
}

TEST(PerfEnvSetup, VboostAndClockLockOnSlurm) {
  PluginHarness h("plugins:\n  perf_env: {enable_vboost: true, lock_gpu_freq: 1410}\n");
  h.executor = "slurm";
  h.job_dir = "/lustre/jobs/t";
  h.run();
  ASSERT_EQ(h.out.setup_steps.size(), 2u);
  EXPECT_EQ(
      h.out.setup_steps[0].command,
      "sudo nvidia-smi boost-slider --vboost 1 > /lustre/jobs/t/vboost.\"$SLURMD_NODENAME\".out "
      "2> /lustre/jobs/t/vboost.\"$SLURMD_NODENAME\".err");
  EXPECT_EQ(h.out.setup_steps[1].command, "sudo nvidia-smi -lgc 1410");
  EXPECT_EQ(h.out.setup_steps[1].source, "plugin:perf_env");
}

TEST(PerfEnvSetup, ElsewhereWarnsAndAddsNoStep) {
  PluginHarness h("plugins:\n  perf_env: {enable_vboost: true, lock_gpu_freq: 1410}\n");
  h.executor = "kubernetes";
  h.run();
  EXPECT_TRUE(h.out.setup_steps.empty());
  const Diagnostic* d = h.diag("setup-step-slurm-only");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->severity, Severity::kWarning);
  EXPECT_EQ(d->path, "plugins.perf_env.enable_vboost");
}

TEST(PerfEnvOptions, WrongTypeIsAnErrorAtTheOption) {
  PluginHarness h("plugins:\n  perf_env:\n    enable_vboost: \"yes\"\n");
  h.run();
  const Diagnostic* d = h.diag("wrong-type");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->path, "plugins.perf_env.enable_vboost");
  EXPECT_EQ(d->loc.line, 4);
  EXPECT_TRUE(h.out.env.vars.empty());
}

TEST(PerfEnvOptions, UnknownOptionGetsDidYouMean) {
  PluginHarness h("plugins:\n  perf_env:\n    manual_gc_intervall: 5\n");
  h.run();
  const Diagnostic* d = h.diag("unknown-option");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->path, "plugins.perf_env.manual_gc_intervall");
  EXPECT_NE(d->message.find("did you mean `manual_gc_interval`?"), std::string::npos);
}

TEST(PerfEnvOptions, NullOptionsMeanDefaults) {
  PluginHarness h("plugins:\n  perf_env:\n");
  h.run();
  EXPECT_FALSE(h.diags.has_errors());
  EXPECT_EQ(h.env("CUDA_DEVICE_MAX_CONNECTIONS"), "8");
  EXPECT_EQ(h.env("NVTE_FWD_LAYERNORM_SM_MARGIN"), "16");
}

}  // namespace
}  // namespace bridge
