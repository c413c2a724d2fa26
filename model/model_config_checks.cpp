// E11-E15: Megatron-Core's and Megatron-Bridge's own config checks on model keys that are not
// overlap fields but decide whether the job starts at all. Each was found by running the
// released Megatron-Bridge 0.6.2 on plans `validate` accepted (tests/conformance/), and each
// is refused there at start-up, after the queue wait. Unset keys take the runtime's defaults
// (runtime_model_defaults), as the runtime's own check sees them.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "model/overlap.h"
#include "model/runtime_kind.h"

namespace bridge {

namespace {

bool full_iteration_graph(const ModelSpec& m) {
  const StringList scope = m.cuda_graph_scope.get_or({});
  return m.cuda_graph_impl.get_or("none") == "local" &&
         std::find(scope.begin(), scope.end(), "full_iteration") != scope.end();
}

std::string bias_text(const Field<bool>& f, const RuntimeModelDefaults& d) {
  if (f.is_set()) return *f.value ? "true" : "false";
  return fmt::format("unset, which is {} ({})", d.add_bias_linear ? "true" : "false", d.source);
}

// E11, E12: linear-layer bias against the fused bias-GeLU and against expert TP.
void check_linear_bias(const Recipe& r, const Topology& t, Diagnostics& diags) {
  const ModelSpec& m = r.model;
  const RuntimeModelDefaults d = runtime_model_defaults(r);
  const bool bias = m.add_bias_linear.get_or(d.add_bias_linear);
  if (!bias && d.bias_activation_fusion && !d.gated_linear_unit &&
      std::string_view(d.activation) == "gelu")
    diags.error("bias-gelu-fusion-needs-bias", "model.add_bias_linear", m.add_bias_linear.loc,
                fmt::format("model.add_bias_linear is {}, but {} fuse the bias into GeLU "
                            "(bias_activation_fusion, no gated linear unit): Megatron-Core "
                            "refuses that (\"When bias_activation_fusion is True, "
                            "gated_linear_unit is False and activation function is gelu, "
                            "add_bias_linear must also be True.\")",
                            bias_text(m.add_bias_linear, d), d.source),
                "remove model.add_bias_linear (the recipe's biased layers are what its fused "
                "kernels expect)");
  if (bias && (d.known || m.add_bias_linear.is_set()) && m.num_moe_experts.get_or(0) > 0 &&
      t.etp > 1)
    diags.error(
        "moe-bias-needs-etp1", "model.add_bias_linear",
        m.add_bias_linear.is_set() ? m.add_bias_linear.loc : m.expert_tensor_parallel_size.loc,
        fmt::format("an MoE model with linear-layer bias (model.add_bias_linear {}) and "
                    "expert_tensor_parallel_size {}: Megatron-Core refuses it (\"Bias in "
                    "Moe is only supported when ETP==1\")",
                    bias_text(m.add_bias_linear, d), t.etp),
        "set model.expert_tensor_parallel_size: 1, or model.add_bias_linear: false");
}

// E13, E14: the CUDA-graph implementations Megatron-Bridge and Megatron-Core accept.
void check_cuda_graphs(const Recipe& r, Diagnostics& diags) {
  const ModelSpec& m = r.model;
  const std::string impl = m.cuda_graph_impl.get_or("none");
  if (impl == "local" && !full_iteration_graph(m))
    diags.error("local-cuda-graph-needs-full-iteration", "model.cuda_graph_impl",
                m.cuda_graph_impl.loc,
                "cuda_graph_impl local without `full_iteration` in model.cuda_graph_scope: "
                "Megatron-Bridge supports the local implementation only for full-iteration "
                "graphs (ValueError when the config is finalised)",
                "set model.cuda_graph_impl: transformer_engine for scoped graphs (attn, mlp, "
                "moe_router, ...), or model.cuda_graph_scope: [full_iteration]");
  if (impl == "transformer_engine" && m.recompute_granularity.get_or("") == "full")
    diags.error("full-recompute-needs-full-iteration-graph", "model.recompute_granularity",
                m.recompute_granularity.loc,
                "recompute_granularity full with scoped CUDA graphs (cuda_graph_impl "
                "transformer_engine): Megatron-Core refuses it (\"full recompute is only "
                "supported with full iteration CUDA graph.\")",
                "use recompute_granularity: selective, or full-iteration graphs "
                "(cuda_graph_impl: local, cuda_graph_scope: [full_iteration]), or no graphs");
}

// E15: Megatron-Bridge 0.6.2 imports Transformer Engine unconditionally (its PEFT modules
// import transformer_engine.pytorch), so without it the runtime does not even start.
void check_transformer_engine(const Recipe& r, Diagnostics& diags) {
  const auto& te = r.runtime.transformer_engine;
  if (!runtime_is_megatron_bridge(r.runtime) || !te.is_set() || te.value->present) return;
  diags.error("megatron-bridge-needs-te", "runtime.transformer_engine", te.loc,
              fmt::format("runtime.transformer_engine is false, but runtime adapter {} runs "
                          "Megatron-Bridge, which cannot be imported without Transformer Engine "
                          "(ModuleNotFoundError: No module named 'transformer_engine')",
                          effective_adapter_name(r.runtime)),
              "use a container with Transformer Engine and declare its version in "
              "runtime.transformer_engine, or another runtime adapter");
}

// E17: selective recompute of modules Megatron-Core knows ("Invalid choices for
// recompute_modules"; 0.6.2's own DeepSeek-V4 recipes name `mhc` and are refused there).
void check_recompute_modules(const Recipe& r, Diagnostics& diags) {
  const ModelSpec& m = r.model;
  if (m.recompute_granularity.get_or("") != "selective" || !m.recompute_modules.is_set()) return;
  static const std::vector<std::string> kAllowed{"core_attn",      "moe_act",     "layernorm",
                                                 "mla_up_proj",    "mlp",         "moe",
                                                 "shared_experts", "gdn_norm_out"};
  for (const auto& module : *m.recompute_modules.value)
    if (std::find(kAllowed.begin(), kAllowed.end(), module) == kAllowed.end())
      diags.error("recompute-module-unknown", "model.recompute_modules", m.recompute_modules.loc,
                  fmt::format("model.recompute_modules names `{}`, which Megatron-Core does not "
                              "recompute (\"Invalid choices for recompute_modules\"; it takes {})",
                              module, fmt::join(kAllowed, ", ")),
                  "set model.recompute_modules to modules of that list");
}

// E18: what Megatron-Core's TransformerConfig asks of recompute: full recompute needs a method
// ("recompute_method must be \"block\" or \"uniform\"") and a layer count of 1..layers per
// pipeline rank; selective recompute takes no layer count.
void check_recompute(const Recipe& r, const Topology& t, Diagnostics& diags) {
  const ModelSpec& m = r.model;
  const std::string granularity = m.recompute_granularity.get_or("");
  if (granularity == "selective" && m.recompute_num_layers.is_set())
    diags.error("recompute-num-layers-with-selective", "model.recompute_num_layers",
                m.recompute_num_layers.loc,
                "model.recompute_num_layers is set with selective recompute: Megatron-Core "
                "refuses it (\"recompute_num_layers must be None\")",
                "remove model.recompute_num_layers");
  if (granularity != "full") return;
  if (!m.recompute_method.is_set())
    diags.error("full-recompute-needs-method", "model.recompute_method",
                m.recompute_granularity.loc,
                "full recompute without model.recompute_method: Megatron-Core refuses it "
                "(\"recompute_method must be \\\"block\\\" or \\\"uniform\\\"\")",
                "set model.recompute_method: uniform (or block) and model.recompute_num_layers");
  const int64_t per_rank = m.num_layers.is_set() && t.pp > 0 ? *m.num_layers.value / t.pp : 0;
  const auto& n = m.recompute_num_layers;
  if (!n.is_set() || *n.value < 1 || (per_rank > 0 && *n.value > per_rank))
    diags.error("full-recompute-num-layers", "model.recompute_num_layers",
                n.is_set() ? n.loc : m.recompute_granularity.loc,
                per_rank > 0
                    ? fmt::format("full recompute needs model.recompute_num_layers between 1 and "
                                  "the layers per pipeline rank ({}), got {}",
                                  per_rank, n.is_set() ? std::to_string(*n.value) : "none")
                    : fmt::format("full recompute needs model.recompute_num_layers of at least 1, "
                                  "got {}",
                                  n.is_set() ? std::to_string(*n.value) : "none"),
                "set model.recompute_num_layers (with recompute_method uniform: layers per "
                "recomputed chunk; block: layers recomputed per pipeline rank)");
}

// E19, E20: MoE settings Megatron-Core refuses when it builds the TransformerConfig.
void check_moe(const Recipe& r, const Topology& t, Diagnostics& diags) {
  const ModelSpec& m = r.model;
  const std::string dispatcher = m.moe_token_dispatcher_type.get_or("allgather");
  if (m.num_moe_experts.get_or(0) > 0 && m.moe_shared_expert_overlap.get_or(false) &&
      dispatcher != "alltoall" && dispatcher != "flex")
    diags.error("shared-expert-overlap-dispatcher", "model.moe_shared_expert_overlap",
                m.moe_shared_expert_overlap.loc,
                fmt::format("model.moe_shared_expert_overlap with the {} dispatcher: "
                            "Megatron-Core refuses it (\"moe_shared_expert_overlap only works "
                            "with alltoall or flex token dispatcher\")",
                            dispatcher),
                "set model.moe_token_dispatcher_type: alltoall, or "
                "model.moe_shared_expert_overlap: false");
  // Unset experts mean a dense model only where the recipe base is known to have none.
  const bool base_known = !r.base.function.empty() && r.base.unknown_because.empty();
  if (t.ep > 1 && !m.num_moe_experts.is_set() && base_known)
    diags.error("ep-without-experts", "model.expert_model_parallel_size",
                m.expert_model_parallel_size.loc,
                fmt::format("expert_model_parallel_size {} on a model without experts ({} has "
                            "none): Megatron-Core refuses it (\"num_moe_experts must be non "
                            "None to use expert-parallel\")",
                            t.ep, r.base.function),
                "set model.expert_model_parallel_size: 1, or choose an MoE recipe");
}

// E22: an `mlp` CUDA graph on an MoE model needs dense layers to capture ("mlp cuda graph is
// only supported for dense layers"). Whether the model has any is its moe_layer_freq, which
// only the recipe base knows; without a base, Megatron-Core's default (every layer MoE) may
// not be the model's, so the rule warns that it cannot tell.
void check_mlp_cuda_graph(const Recipe& r, Diagnostics& diags) {
  const ModelSpec& m = r.model;
  const std::string impl = m.cuda_graph_impl.get_or("none");
  if ((impl != "transformer_engine" && impl != "local") || m.num_moe_experts.get_or(0) <= 1) return;
  const StringList scope = m.cuda_graph_scope.get_or({});
  if (std::find(scope.begin(), scope.end(), "mlp") == scope.end()) return;
  const bool base_known = !r.base.function.empty() && r.base.unknown_because.empty();
  if (base_known && r.base.moe_dense_layers) return;
  const std::string help =
      "remove `mlp` from model.cuda_graph_scope (graph `attn` and `moe_router` instead), or "
      "set model.cuda_graph_impl: none";
  if (base_known) {
    diags.error("mlp-cuda-graph-all-moe", "model.cuda_graph_scope", m.cuda_graph_scope.loc,
                fmt::format("model.cuda_graph_scope has `mlp`, but every layer of {} is MoE: "
                            "Megatron-Core refuses it (\"mlp cuda graph is only supported for "
                            "dense layers\")",
                            r.base.function),
                help);
    return;
  }
  diags.warning("mlp-cuda-graph-all-moe-unchecked", "model.cuda_graph_scope",
                m.cuda_graph_scope.loc,
                "model.cuda_graph_scope has `mlp` on an MoE model, which Megatron-Core refuses "
                "unless some layers are dense (moe_layer_freq); no recipe base says whether this "
                "model's are, so this is not checked",
                help + "; or check with --runtime-check");
}

// E21: a recipe base whose optimizer is precision-aware needs the distributed optimizer
// ("--use-precision-aware-optimizer only supported with distributed optimizer").
void check_precision_aware_optimizer(const Recipe& r, Diagnostics& diags) {
  const Field<bool>& dist = r.ddp.use_distributed_optimizer;
  if (!r.base.precision_aware_optimizer || !user_set(dist) || *dist.value) return;
  diags.error("precision-aware-optimizer-needs-dist-opt", "ddp.use_distributed_optimizer", dist.loc,
              fmt::format("ddp.use_distributed_optimizer is false, but the recipe base {} uses the "
                          "precision-aware optimizer, which Megatron-Core refuses without the "
                          "distributed optimizer (\"--use-precision-aware-optimizer only supported "
                          "with distributed optimizer\")",
                          r.base.function),
              "remove ddp.use_distributed_optimizer (the recipe turns it on), or set "
              "optimizer.use_precision_aware_optimizer=false in runtime.args");
}

// E16: Megatron-Bridge's HybridEP backend runs on the GPUs it names ("HybridEP is supported
// for GB200, GB300 with NVL72 and for Ampere, Hopper, B200 and B300 GPUs", when the config is
// finalised); NVIDIA's own VR200 recipes with it are refused there too.
void check_hybridep_gpu(const Recipe& r, const Topology& t, Diagnostics& diags) {
  const ModelSpec& m = r.model;
  if (m.moe_token_dispatcher_type.get_or("allgather") != "flex" ||
      m.moe_flex_dispatcher_backend.get_or("") != "hybridep")
    return;
  static const std::vector<std::string> kSupported{"a100", "h100",  "h200", "b200",
                                                   "b300", "gb200", "gb300"};
  if (t.gpu.empty() || std::find(kSupported.begin(), kSupported.end(), t.gpu) != kSupported.end())
    return;
  diags.error("hybridep-gpu-unsupported", "model.moe_flex_dispatcher_backend",
              m.moe_flex_dispatcher_backend.loc,
              fmt::format("moe_flex_dispatcher_backend hybridep on {}: Megatron-Bridge refuses it "
                          "when the config is finalised (\"HybridEP is supported for GB200, GB300 "
                          "with NVL72 and for Ampere, Hopper, B200 and B300 GPUs\")",
                          t.gpu),
              "set model.moe_flex_dispatcher_backend: deepep, or "
              "model.moe_token_dispatcher_type: alltoall");
}

}  // namespace

namespace overlap_detail {

bool is_full_iteration_cuda_graph(const ModelSpec& model) { return full_iteration_graph(model); }

void check_model_config(const Recipe& r, const Topology& t, Diagnostics& diags) {
  // The checks of the runtime that makes them: bridge-probe and `none` runtimes build no
  // Megatron config.
  if (!runtime_is_megatron_bridge(r.runtime)) return;
  check_linear_bias(r, t, diags);
  check_cuda_graphs(r, diags);
  check_mlp_cuda_graph(r, diags);
  check_hybridep_gpu(r, t, diags);
  check_recompute_modules(r, diags);
  check_recompute(r, t, diags);
  check_moe(r, t, diags);
  check_precision_aware_optimizer(r, diags);
  check_transformer_engine(r, diags);
}

}  // namespace overlap_detail

}  // namespace bridge
