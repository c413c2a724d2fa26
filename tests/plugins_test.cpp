// The plugin runner: registry, unknown names, conflicts, env precedence (-E > env: >
// plugins), `${VAR}` expansion, secrets, contradiction warnings and args_style.
#include <gtest/gtest.h>

#include "plugins/plugin_options.h"
#include "tests/support/plugin_testing.h"

namespace bridge {
namespace {

using testing::make_topology;
using testing::PluginHarness;

TEST(PluginRegistry, ListsEveryPluginWithADescription) {
  std::vector<std::string> names;
  for (const auto& p : plugin_registry()) {
    names.emplace_back(p.name);
    EXPECT_NE(std::string(p.description), "");
    EXPECT_NE(p.make(), nullptr);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"perf_env", "preemption", "fault_tolerance", "nsys",
                                             "pytorch_profiler", "wandb", "comet"}));
}

TEST(PluginRegistry, UnknownPluginGetsDidYouMean) {
  PluginHarness h("plugins:\n  perf_evn: {}\n");
  h.run();
  const Diagnostic* d = h.diag("unknown-plugin");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->message, "unknown plugin `perf_evn` (did you mean `perf_env`?)");
  EXPECT_EQ(d->path, "plugins.perf_evn");
  EXPECT_EQ(d->loc.line, 3);
  EXPECT_TRUE(h.out.env.vars.empty());
}

// Two test plugins that both set MY_VAR (to different values unless told otherwise).
class SetsVar : public LaunchPlugin {
 public:
  explicit SetsVar(std::string value) : value_(std::move(value)) {}
  void contribute(const PluginContext&, const YamlNode&, const SourceLoc&, PluginContribution& out,
                  Diagnostics&) const override {
    out.env.push_back(EnvVar{"MY_VAR", value_, "", "test"});
  }

 private:
  std::string value_;
};

std::vector<PluginInfo> colliding_registry() {
  return {
      {"alpha", "sets MY_VAR=1", [] { return std::unique_ptr<LaunchPlugin>(new SetsVar("1")); }},
      {"beta", "sets MY_VAR=2", [] { return std::unique_ptr<LaunchPlugin>(new SetsVar("2")); }},
      {"gamma", "sets MY_VAR=1", [] { return std::unique_ptr<LaunchPlugin>(new SetsVar("1")); }}};
}

TEST(PluginConflict, TwoPluginsSettingOneVariableIsAnErrorNamingBoth) {
  PluginHarness h("plugins:\n  alpha: {}\n  beta: {}\n");
  h.run(colliding_registry());
  const Diagnostic* d = h.diag("plugin-env-conflict");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_NE(d->message.find("plugin:alpha"), std::string::npos);
  EXPECT_NE(d->message.find("plugin:beta"), std::string::npos);
  EXPECT_EQ(d->path, "plugins.beta");
  EXPECT_EQ(h.env("MY_VAR"), "1");
}

TEST(PluginConflict, SameValueFromTwoPluginsIsNotAConflict) {
  PluginHarness h("plugins:\n  alpha: {}\n  gamma: {}\n");
  h.run(colliding_registry());
  EXPECT_FALSE(h.diags.has_errors());
  EXPECT_EQ(h.var("MY_VAR")->source, "plugin:alpha");
}

TEST(PluginConflict, RecipeEnvStillWinsOverPlugins) {
  PluginHarness h("plugins:\n  alpha: {}\nenv:\n  MY_VAR: mine\n");
  h.run(colliding_registry());
  EXPECT_EQ(h.env("MY_VAR"), "mine");
  EXPECT_EQ(h.var("MY_VAR")->source, "recipe env");
  EXPECT_EQ(h.var("MY_VAR")->reason, "set in env:; overrides `1` from plugin:alpha");
}

TEST(PluginIncompatible, NsysWithFaultToleranceIsRejected) {
  PluginHarness h(
      "plugins:\n  fault_tolerance: {}\n"
      "  nsys: {profile_step_start: 10, profile_step_end: 12}\n");
  h.run();
  const Diagnostic* d = h.diag("incompatible-plugins");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_EQ(d->path, "plugins.nsys");
  EXPECT_NE(d->message.find("`fault_tolerance` and `nsys`"), std::string::npos);

  PluginHarness reversed(
      "plugins:\n  nsys: {profile_step_start: 10, profile_step_end: 12}\n"
      "  fault_tolerance: {}\n");
  reversed.run();
  ASSERT_NE(reversed.diag("incompatible-plugins"), nullptr);
  EXPECT_EQ(reversed.diag("incompatible-plugins")->path, "plugins.fault_tolerance");
}

TEST(PluginSources, EveryContributionNamesItsPluginAndAReason) {
  PluginHarness h(
      "plugins:\n  perf_env: {deterministic: true}\n  preemption: {}\n"
      "model: {compute_dtype: nvfp4}\n");
  h.executor = "slurm";
  h.run();
  ASSERT_FALSE(h.out.env.vars.empty());
  for (const auto& v : h.out.env.vars) {
    EXPECT_EQ(v.source, "plugin:perf_env") << v.name;
    EXPECT_FALSE(v.reason.empty()) << v.name;
  }
  for (const auto& a : h.out.runtime_args) {
    EXPECT_EQ(a.source.rfind("plugin:", 0), 0u) << a.text;
    EXPECT_FALSE(a.reason.empty()) << a.text;
  }
  EXPECT_EQ(h.out.executor.preempt_source, "plugin:preemption");
}

// -E beats the plugin value; on Hopper with TP overlap resolved on that contradicts overlap.
TEST(PluginEnvPrecedence, CliEnvBeatsPluginAndWarnsWhenItContradictsTpOverlapOnHopper) {
  PluginHarness h("plugins:\n  perf_env: {}\n");
  h.topo = make_topology("h100", 8, /*tp=*/4);
  h.set_tp_overlap(true);
  h.cli_env = {"CUDA_DEVICE_MAX_CONNECTIONS=8"};
  h.run();
  EXPECT_EQ(h.env("CUDA_DEVICE_MAX_CONNECTIONS"), "8");
  EXPECT_EQ(h.var("CUDA_DEVICE_MAX_CONNECTIONS")->source, "-E");
  EXPECT_NE(h.var("CUDA_DEVICE_MAX_CONNECTIONS")->reason.find("overrides `1` from plugin:perf_env"),
            std::string::npos);
  const Diagnostic* d = h.diag("env-contradicts-overlap");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->severity, Severity::kWarning);
  EXPECT_NE(d->message.find("serialize"), std::string::npos);
  EXPECT_EQ(d->help, "drop the explicit value (perf_env then sets 1) or set it to 1");
  EXPECT_FALSE(h.diags.has_errors());
}

// The fix says what dropping the value gives only where a plugin would then set 1: without
// perf_env nothing sets it (a new user was told "perf_env then sets 1"; issue 47).
TEST(PluginEnvPrecedence, TheContradictionsFixPromisesOnlyWhatAPluginWouldSet) {
  PluginHarness h("env:\n  CUDA_DEVICE_MAX_CONNECTIONS: \"8\"\n");
  h.topo = make_topology("h100", 8, /*tp=*/4);
  h.set_tp_overlap(true);
  h.run();
  const Diagnostic* d = h.diag("env-contradicts-overlap");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->help, "set it to 1");
}

TEST(PluginEnvPrecedence, RecipeEnvContradictionPointsAtTheEntry) {
  PluginHarness h("plugins:\n  perf_env: {}\nenv:\n  CUDA_DEVICE_MAX_CONNECTIONS: \"32\"\n");
  h.topo = make_topology("h200", 8, /*tp=*/2);
  h.set_tp_overlap(true);
  h.run();
  EXPECT_EQ(h.env("CUDA_DEVICE_MAX_CONNECTIONS"), "32");
  const Diagnostic* d = h.diag("env-contradicts-overlap");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->path, "env.CUDA_DEVICE_MAX_CONNECTIONS");
  EXPECT_EQ(d->loc.line, 5);
}

TEST(PluginEnvPrecedence, NoContradictionOnBlackwellOrWithOneOrWithoutTpOverlap) {
  for (auto [gpu, value, tp_overlap] :
       {std::tuple{"b200", "8", true}, std::tuple{"h100", "1", true},
        std::tuple{"h100", "8", false}}) {
    PluginHarness h("plugins:\n  perf_env: {}\n");
    h.topo = make_topology(gpu, 8, /*tp=*/4);
    h.set_tp_overlap(tp_overlap);
    h.cli_env = {std::string("CUDA_DEVICE_MAX_CONNECTIONS=") + value};
    h.run();
    EXPECT_EQ(h.env("CUDA_DEVICE_MAX_CONNECTIONS"), value);
    EXPECT_EQ(h.diag("env-contradicts-overlap"), nullptr) << gpu << " " << value;
  }
}

TEST(PluginEnvPrecedence, CliEnvBeatsRecipeEnv) {
  PluginHarness h("env:\n  NCCL_DEBUG: WARN\n");
  h.cli_env = {"NCCL_DEBUG=INFO"};
  h.run();
  EXPECT_EQ(h.env("NCCL_DEBUG"), "INFO");
  EXPECT_EQ(h.var("NCCL_DEBUG")->source, "-E");
  EXPECT_EQ(h.var("NCCL_DEBUG")->reason,
            "set with -E on the command line; overrides `WARN` from recipe env");
}

TEST(PluginEnvExpansion, RecipeEnvExpandsAndNamesTheVariables) {
  PluginHarness h("env:\n  DATA: \"/data/${USER}/${PROJ}\"\n  LITERAL: \"$${HOME} $HOME\"\n");
  h.host.set("USER", "alice");
  h.host.set("PROJ", "llm");
  h.run();
  EXPECT_EQ(h.env("DATA"), "/data/alice/llm");
  EXPECT_EQ(h.var("DATA")->reason, "set in env: (expanded ${USER}, ${PROJ})");
  EXPECT_EQ(h.var("DATA")->source, "recipe env");
  EXPECT_EQ(h.env("LITERAL"), "${HOME} $HOME");
}

TEST(PluginEnvExpansion, UnsetVariableIsAnError) {
  PluginHarness h("env:\n  DATA: \"/data/${NOPE}\"\n");
  h.run();
  const Diagnostic* d = h.diag("unset-variable");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->path, "env.DATA");
  EXPECT_EQ(h.env("DATA"), "<unset>");
}

TEST(PluginEnvExpansion, ExpandTrueLeavesTheValueForTheRankShell) {
  PluginHarness h("env:\n  OUT: {value: \"/x/${SLURM_JOB_ID}\", expand: true}\n");
  h.run();
  EXPECT_FALSE(h.diags.has_errors());
  EXPECT_EQ(h.env("OUT"), "/x/${SLURM_JOB_ID}");
  EXPECT_TRUE(h.var("OUT")->expand);
}

TEST(PluginEnvExpansion, CliEnvIsLiteral) {
  PluginHarness h("");
  h.host.set("HOME", "/home/alice");
  h.cli_env = {"P=${HOME}/x", "Q=a=b"};
  h.run();
  EXPECT_EQ(h.env("P"), "${HOME}/x");
  EXPECT_EQ(h.env("Q"), "a=b");
}

TEST(PluginEnvCli, BadEntriesAreErrors) {
  PluginHarness h("");
  h.cli_env = {"1BAD=x", "NO_EQUALS", "GOOD="};
  h.run();
  size_t bad = 0;
  for (const auto& d : h.diags.items()) bad += d.code == "bad-env";
  EXPECT_EQ(bad, 2u);
  EXPECT_EQ(h.env("1BAD"), "<unset>");
  EXPECT_EQ(h.env("GOOD"), "");
}

TEST(PluginSecrets, RecipeSecretKeepsItsValueButNeverShowsIt) {
  PluginHarness h("env:\n  TOKEN: {value: \"${MY_TOKEN}\", secret: true}\n");
  h.host.set("MY_TOKEN", "s3cr3t-marker");
  h.cli_env = {"WANDB_API_KEY=from-cli-marker"};
  h.run();
  ASSERT_NE(h.var("TOKEN"), nullptr);
  EXPECT_EQ(h.env("TOKEN"), "s3cr3t-marker");
  EXPECT_TRUE(h.var("TOKEN")->secret);
  EXPECT_EQ(redacted_value(*h.var("TOKEN")), "<secret>");
  EXPECT_TRUE(h.var("WANDB_API_KEY")->secret);
  for (const auto& v : h.out.env.vars) {
    EXPECT_EQ(v.reason.find("marker"), std::string::npos);
  }
}

TEST(PluginArgsStyle, FlagsUseTheMapAndDropFalseBooleans) {
  PluginHarness h(
      "plugins:\n  preemption:\n    args_style: flags\n    args_map:\n"
      "      train.exit_signal_handler: --enable-exit-handler\n"
      "      train.exit_signal_handler_for_dataloader: --exit-handler-for-data-loader\n"
      "  perf_env:\n    args_style: flags\n    args_map: {train.manual_gc: --manual-gc, "
      "train.manual_gc_interval: --manual-gc-interval}\n");
  h.run();
  EXPECT_FALSE(h.diags.has_errors());
  EXPECT_EQ(h.args(), (std::vector<std::string>{"--enable-exit-handler", "--manual-gc",
                                                "--manual-gc-interval=100"}));
}

TEST(PluginArgsStyle, MissingMapEntryIsAnErrorNamingTheKey) {
  PluginHarness h(
      "plugins:\n  perf_env:\n    args_style: flags\n"
      "    args_map: {train.manual_gc: --manual-gc}\n");
  h.run();
  const Diagnostic* d = h.diag("missing-args-map");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->path, "plugins.perf_env.args_map");
  EXPECT_NE(d->message.find("`train.manual_gc_interval`"), std::string::npos);
  EXPECT_EQ(d->loc.line, 5);
}

TEST(PluginArgsStyle, UnknownStyleIsAnError) {
  PluginHarness h("plugins:\n  preemption: {args_style: flag}\n");
  h.run();
  const Diagnostic* d = h.diag("bad-value");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->path, "plugins.preemption.args_style");
  EXPECT_NE(d->message.find("did you mean `flags`?"), std::string::npos);
}

TEST(PluginArgsStyle, HydraQuotesStringsWithSpecialCharacters) {
  EXPECT_EQ(hydra_quote("/jobs/t/wandb"), "/jobs/t/wandb");
  EXPECT_EQ(hydra_quote("my run"), "'my run'");
  EXPECT_EQ(hydra_quote("it's"), "'it\\'s'");
  EXPECT_EQ(hydra_quote(""), "''");
}

}  // namespace
}  // namespace bridge
