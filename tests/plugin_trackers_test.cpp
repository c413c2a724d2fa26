// wandb and comet: active only with their API key, which travels as a secret.
#include <gtest/gtest.h>

#include "tests/support/plugin_testing.h"

namespace bridge {
namespace {

using testing::PluginHarness;
using Args = std::vector<std::string>;

constexpr const char* kMarker = "KEY-MARKER-5f3a";

void expect_no_marker_outside_the_secret(const PluginHarness& h) {
  for (const auto& v : h.out.env.vars) EXPECT_EQ(v.reason.find(kMarker), std::string::npos);
  for (const auto& a : h.out.runtime_args) EXPECT_EQ(a.text.find(kMarker), std::string::npos);
  for (const auto& d : h.diags.items()) EXPECT_EQ(d.message.find(kMarker), std::string::npos);
}

TEST(PluginWandb, WithKeySetsSecretAndArgs) {
  PluginHarness h("plugins:\n  wandb: {project: llm, entity: team, name: \"run 1\"}\n");
  h.host.set("WANDB_API_KEY", kMarker);
  h.run();
  EXPECT_FALSE(h.diags.has_errors());
  const EnvVar* key = h.var("WANDB_API_KEY");
  ASSERT_NE(key, nullptr);
  EXPECT_EQ(key->value, kMarker);
  EXPECT_TRUE(key->secret);
  EXPECT_EQ(key->source, "plugin:wandb");
  EXPECT_EQ(redacted_value(*key), "<secret>");
  EXPECT_EQ(h.args(),
            (Args{"logger.wandb_project=llm", "logger.wandb_entity=team",
                  "logger.wandb_exp_name='run 1'", "logger.wandb_save_dir=/jobs/t/wandb"}));
  expect_no_marker_outside_the_secret(h);
}

TEST(PluginWandb, WithoutKeyWarnsAndHasNoEffect) {
  PluginHarness h("plugins:\n  wandb: {project: llm}\n");
  h.run();
  const Diagnostic* d = h.diag("tracker-no-api-key");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->severity, Severity::kWarning);
  EXPECT_EQ(d->path, "plugins.wandb");
  EXPECT_TRUE(h.out.env.vars.empty());
  EXPECT_TRUE(h.out.runtime_args.empty());
}

TEST(PluginWandb, WithoutKeyIsAnErrorUnderStrict) {
  PluginHarness h("plugins:\n  wandb: {project: llm}\n", /*strict=*/true);
  h.run();
  ASSERT_NE(h.diag("tracker-no-api-key"), nullptr);
  EXPECT_EQ(h.diag("tracker-no-api-key")->severity, Severity::kError);
}

TEST(PluginWandb, ProjectIsRequired) {
  PluginHarness h("plugins:\n  wandb: {name: x}\n");
  h.host.set("WANDB_API_KEY", kMarker);
  h.run();
  ASSERT_NE(h.diag("missing-option"), nullptr);
  EXPECT_EQ(h.diag("missing-option")->path, "plugins.wandb.project");
  EXPECT_TRUE(h.out.env.vars.empty());
}

TEST(PluginComet, WithKeySetsSecretAndArgs) {
  PluginHarness h("plugins:\n  comet: {project: llm, workspace: ws, name: exp1}\n");
  h.host.set("COMET_API_KEY", kMarker);
  h.run();
  EXPECT_FALSE(h.diags.has_errors());
  ASSERT_NE(h.var("COMET_API_KEY"), nullptr);
  EXPECT_EQ(h.var("COMET_API_KEY")->value, kMarker);
  EXPECT_TRUE(h.var("COMET_API_KEY")->secret);
  EXPECT_EQ(h.args(), (Args{"logger.comet_project=llm", "logger.comet_workspace=ws",
                            "logger.comet_experiment_name=exp1"}));
  expect_no_marker_outside_the_secret(h);
}

TEST(PluginComet, WithoutKeyWarnsAndHasNoEffect) {
  PluginHarness h("plugins:\n  comet: {project: llm}\n");
  h.host.set("WANDB_API_KEY", kMarker);  // the other tracker's key does not count
  h.run();
  ASSERT_NE(h.diag("tracker-no-api-key"), nullptr);
  EXPECT_TRUE(h.out.env.vars.empty());
  EXPECT_TRUE(h.out.runtime_args.empty());
}

}  // namespace
}  // namespace bridge
