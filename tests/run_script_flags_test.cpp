// run_script.py's flags in runtime.args are read as the recipe keys they set
// (model/run_script_flags.h), so the rules see them: a flag that contradicts a value the user
// planned is an error, one that agrees a warning naming the key, and one on a key the user left
// to the recipe becomes the plan's value (issue 46: NVIDIA's guide as checked keys).
#include "model/run_script_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "plugins/plugin.h"
#include "system/host_env.h"
#include "tests/support/map_environment.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

using ::testing::HasSubstr;

std::vector<std::pair<std::string, std::string>> settings(std::vector<std::string> args) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& use : run_script_flag_uses(args))
    for (const auto& s : use.sets) out.emplace_back(s.key, s.value);
  return out;
}

TEST(RunScriptFlags, EachFlagSetsTheKeysRunScriptSets) {
  using KV = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(settings({"--moe_a2a_overlap", "true"}),
            (KV{{"comm_overlap.overlap_moe_expert_parallel_comm", "true"},
                {"comm_overlap.delay_wgrad_compute", "true"},
                {"model.moe_shared_expert_overlap", "false"}}));
  EXPECT_EQ(settings({"--moe_a2a_overlap=Y"}).size(), 3u);        // bool_arg: any case, y/yes/t/1
  EXPECT_TRUE(settings({"--moe_a2a_overlap", "false"}).empty());  // false does nothing
  EXPECT_EQ(settings({"--moe_flex_dispatcher_backend", "deepep"}),
            (KV{{"model.moe_token_dispatcher_type", "flex"},
                {"model.moe_flex_dispatcher_backend", "deepep"},
                {"model.moe_shared_expert_overlap", "false"}}));
  EXPECT_EQ(settings({"--moe_flex_dispatcher_backend", "None"}),
            (KV{{"model.moe_token_dispatcher_type", "alltoall"}}));
  EXPECT_EQ(settings({"--cuda_graph_scope=attn,moe_router"}),
            (KV{{"model.cuda_graph_scope", "[attn,moe_router]"}}));
  EXPECT_EQ(settings({"-rl", "4"}), (KV{{"model.recompute_granularity", "full"},
                                        {"model.recompute_method", "block"},
                                        {"model.recompute_num_layers", "4"}}));
  EXPECT_EQ(settings({"-tp", "2", "train.manual_gc=true", "--lr", "0.1"}),
            (KV{{"model.tensor_model_parallel_size", "2"}}));
  EXPECT_TRUE(settings({"--cuda_graph_impl"}).empty());  // no value: the parser refuses it
  auto uses = run_script_flag_uses({"--moe_a2a_overlap", "true"});
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].written, "--moe_a2a_overlap true");
}

class RunScriptFlagsPlan : public ::testing::Test {
 protected:
  Plan plan(const std::string& recipe, std::vector<std::string> overrides) {
    PlanRequest req;
    req.recipe_path = std::string(test::kSourceDir) + "/" + recipe;
    req.overrides = std::move(overrides);
    req.executor = "slurm";
    return build_plan(req, env_, plugin_registry(), diags_);
  }
  const Diagnostic* find(const std::string& code, const std::string& text = "") const {
    for (const auto& d : diags_.items())
      if (d.code == code && d.message.find(text) != std::string::npos) return &d;
    return nullptr;
  }
  MapEnvironment env_{{{"HOME", "/home/user"}}};
  Diagnostics diags_;
};

const char* kQwen = "examples/recipes/qwen3-30b-a3b-ep-overlap.yaml";
const char* kGuide = "examples/named/qwen3-30b-a3b-guide-smoke.yaml";

// The guide's pitfall in run_script.py's spelling: the flex backend on a recipe that plans the
// alltoall dispatcher. run_script.py would switch the dispatcher to flex; the plan says
// alltoall, so it is an error, and the backend itself is reported as with the recipe key.
TEST_F(RunScriptFlagsPlan, TheFlexBackendFlagAgainstThePlannedDispatcherIsAnError) {
  plan(kQwen, {"runtime.args=[--moe_flex_dispatcher_backend,deepep]"});
  const Diagnostic* d = find("runtime-arg-contradicts-plan", "model.moe_token_dispatcher_type");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_THAT(d->message, HasSubstr("`--moe_flex_dispatcher_backend deepep` sets "
                                    "model.moe_token_dispatcher_type to flex, but the plan has "
                                    "alltoall"));
  EXPECT_NE(find("flex-backend-inactive"), nullptr);
}

// `--moe_a2a_overlap true` also turns delayed wgrad on: on the example, which plans it off, that
// is an error naming the key; the keys it agrees with are warnings that name them.
TEST_F(RunScriptFlagsPlan, TheA2aOverlapFlagCannotFlipAPlannedValueSilently) {
  plan(kQwen, {"runtime.args=[--moe_a2a_overlap,true]"});
  const Diagnostic* d = find("runtime-arg-contradicts-plan", "comm_overlap.delay_wgrad_compute");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->severity, Severity::kError);
  const Diagnostic* agrees =
      find("runtime-arg-repeats-plan", "comm_overlap.overlap_moe_expert_parallel_comm=true");
  ASSERT_NE(agrees, nullptr);
  EXPECT_EQ(agrees->severity, Severity::kWarning);
}

// On a key the user left to the named recipe, the flag is the user's value: the plan holds it,
// every rule sees it (here E22: an mlp CUDA graph on the all-MoE Qwen3-30B-A3B), and its source
// is runtime.args, not the recipe base.
TEST_F(RunScriptFlagsPlan, AFlagOnAKeyTheRecipeBaseDecidesBecomesThePlansValue) {
  Plan p = plan(kGuide, {"model.cuda_graph_impl=null",
                         "runtime.args=[--cuda_graph_impl,transformer_engine,--cuda_graph_scope,"
                         "mlp,-tp,2]"});
  ASSERT_TRUE(p.recipe);
  EXPECT_EQ(p.recipe->model.cuda_graph_impl.value, "transformer_engine");
  EXPECT_FALSE(p.recipe->model.cuda_graph_impl.loc.from_base());
  EXPECT_NE(find("mlp-cuda-graph-all-moe"), nullptr);
  ASSERT_TRUE(p.topology);
  EXPECT_EQ(p.topology->tp, 2);
  EXPECT_NE(find("runtime-arg-repeats-plan", "-tp 2"), nullptr);
}

// Other adapters pass runtime.args to their own scripts: not read as run_script.py's flags.
TEST_F(RunScriptFlagsPlan, OnlyTheMegatronBridgeAdapterReadsThem) {
  Plan p = plan(kQwen, {"runtime.adapter=hydra", "runtime.args=[--cuda_graph_impl,local]"});
  ASSERT_TRUE(p.recipe);
  EXPECT_NE(p.recipe->model.cuda_graph_impl.value, "local");
}

}  // namespace
}  // namespace bridge
