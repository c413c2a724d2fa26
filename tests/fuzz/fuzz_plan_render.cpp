// libFuzzer target: the whole planning pipeline on a fuzzed recipe, then Executor::render
// for every registered executor (local, and slurm/kubernetes when registered): the text
// --dry-run prints, the sbatch script and the manifests. A plan that is complete must
// render without exceptions; errors must come with diagnostics.
#include <cstddef>
#include <cstdint>
#include <string>

#include "executors/executor.h"
#include "plan/plan.h"
#include "plan/plan_output.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/support/fake_services.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  // A fixed host: nothing depends on the machine running the fuzzer.
  static const bridge::MapEnvironment kHost(
      {{"HOME", "/home/fuzz"}, {"USER", "fuzz"}, {"SCRATCH", "/scratch/fuzz"}});
  for (const auto& info : bridge::executor_registry()) {
    bridge::PlanRequest request;
    request.recipe_path = "fuzz.yaml";
    request.executor = info.name;
    bridge::Diagnostics diags;
    bridge::Plan plan =
        bridge::build_plan_from_text(text, request, kHost, bridge::plugin_registry(), diags);
    if (!plan.complete && !diags.has_errors())
      bridge::fuzz::fail("an incomplete plan without an error");
    (void)bridge::plan_to_json(plan, diags).dump(2);
    if (plan.complete) {
      (void)bridge::plan_to_text(plan, false);
      bridge::testing::TestServices seams;  // its runner answers nothing: render runs none
      std::unique_ptr<bridge::Executor> executor =
          bridge::make_executor(bridge::executor_registry(), info.name, seams.services());
      if (!executor) bridge::fuzz::fail(std::string("registered but not made: ") + info.name);
      auto job = executor->render(plan, bridge::dry_run_identity(plan), diags);
      if ((!job || job->dry_run_text().empty()) && !diags.has_errors())
        bridge::fuzz::fail(std::string("empty rendering without an error: ") + info.name);
      if (job && !seams.sleeper.waits.empty())
        bridge::fuzz::fail(std::string("render waited: ") + info.name);
    }
    bridge::fuzz::render_diagnostics(diags);
    if (!plan.recipe) break;  // the recipe itself is invalid: the same for every executor
  }
  return 0;
}
