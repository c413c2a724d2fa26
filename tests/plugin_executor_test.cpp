// preemption and fault_tolerance: runtime args and the executor changes they ask for.
#include <gtest/gtest.h>

#include "tests/support/plugin_testing.h"

namespace bridge {
namespace {

using testing::PluginHarness;

TEST(PluginPreemption, ArgsAndSlurmSignal) {
  PluginHarness h("plugins:\n  preemption: {}\n");
  h.executor = "slurm";
  h.run();
  EXPECT_FALSE(h.diags.has_errors());
  EXPECT_EQ(h.args(), (std::vector<std::string>{"train.exit_signal_handler=true",
                                                "train.exit_signal_handler_for_dataloader=false"}));
  ASSERT_TRUE(h.out.executor.preempt_signal_seconds.has_value());
  EXPECT_EQ(*h.out.executor.preempt_signal_seconds, 60);
  EXPECT_EQ(h.out.executor.preempt_source, "plugin:preemption");
  EXPECT_NE(h.out.executor.preempt_reason.find("checkpoint"), std::string::npos)
      << h.out.executor.preempt_reason;
}

TEST(PluginPreemption, CustomTimeAndDataLoaderOnKubernetes) {
  PluginHarness h(
      "plugins:\n  preemption: {preempt_time: 120, enable_exit_handler_for_data_loader: true}\n");
  h.executor = "kubernetes";
  h.run();
  EXPECT_EQ(h.args(), (std::vector<std::string>{"train.exit_signal_handler=true",
                                                "train.exit_signal_handler_for_dataloader=true"}));
  EXPECT_EQ(h.out.executor.preempt_signal_seconds.value_or(-1), 120);
}

TEST(PluginPreemption, LocalHasNoExecutorChange) {
  PluginHarness h("plugins:\n  preemption: {}\n");
  h.run();
  EXPECT_FALSE(h.out.executor.preempt_signal_seconds.has_value());
  EXPECT_EQ(h.args().size(), 2u);
}

TEST(PluginPreemption, HandlerDisabledEmitsNoArgs) {
  PluginHarness h("plugins:\n  preemption: {enable_exit_handler: false}\n");
  h.executor = "slurm";
  h.run();
  EXPECT_TRUE(h.args().empty());
  EXPECT_EQ(h.out.executor.preempt_signal_seconds.value_or(-1), 60);
}

TEST(PluginFaultTolerance, LauncherRetriesAndArgs) {
  PluginHarness h("plugins:\n  fault_tolerance: {}\n");
  h.executor = "slurm";
  h.run();
  EXPECT_FALSE(h.diags.has_errors());
  EXPECT_EQ(h.out.executor.launcher_wrapper,
            (std::vector<std::string>{"ft_launcher", "--max-restarts=3",
                                      "--ft-initial-rank-heartbeat-timeout=1800",
                                      "--ft-rank-heartbeat-timeout=300"}));
  EXPECT_EQ(h.out.executor.launcher_source, "plugin:fault_tolerance");
  EXPECT_EQ(h.out.executor.retries.value_or(-1), 2);
  EXPECT_EQ(h.out.executor.retries_source, "plugin:fault_tolerance");
  EXPECT_NE(h.out.executor.launcher_reason.find("heartbeats"), std::string::npos);
  EXPECT_NE(h.out.executor.retries_reason.find("num_job_retries_on_failure"), std::string::npos);
  EXPECT_EQ(h.args(),
            (std::vector<std::string>{"ft.enable_ft_package=true", "ft.calc_ft_timeouts=true"}));
}

TEST(PluginFaultTolerance, CustomValues) {
  PluginHarness h(
      "plugins:\n  fault_tolerance: {num_in_job_restarts: 5, num_job_retries_on_failure: 0, "
      "initial_rank_heartbeat_timeout: 600, rank_heartbeat_timeout: 60, "
      "calc_ft_timeouts: false}\n");
  h.run();
  EXPECT_EQ(h.out.executor.launcher_wrapper,
            (std::vector<std::string>{"ft_launcher", "--max-restarts=5",
                                      "--ft-initial-rank-heartbeat-timeout=600",
                                      "--ft-rank-heartbeat-timeout=60"}));
  EXPECT_EQ(h.out.executor.retries.value_or(-1), 0);
  EXPECT_EQ(h.args()[1], "ft.calc_ft_timeouts=false");
}

TEST(PluginFaultTolerance, NegativeRestartsIsAnError) {
  PluginHarness h("plugins:\n  fault_tolerance:\n    num_in_job_restarts: -1\n");
  h.run();
  const Diagnostic* d = h.diag("out-of-range");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->path, "plugins.fault_tolerance.num_in_job_restarts");
  EXPECT_EQ(d->loc.line, 4);
  EXPECT_TRUE(h.out.executor.launcher_wrapper.empty());
}

}  // namespace
}  // namespace bridge
