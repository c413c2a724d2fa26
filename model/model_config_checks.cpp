// E11-E15: Megatron-Core's and Megatron-Bridge's own config checks on model keys that are not
// overlap fields but decide whether the job starts at all. Each was found by running the
// released Megatron-Bridge 0.6.2 on plans `validate` accepted (tests/conformance/), and each
// is refused there at start-up, after the queue wait. Unset keys take the runtime's defaults
// (runtime_model_defaults), as the runtime's own check sees them.
#include <fmt/format.h>

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

}  // namespace

namespace overlap_detail {

bool is_full_iteration_cuda_graph(const ModelSpec& model) { return full_iteration_graph(model); }

void check_model_config(const Recipe& r, const Topology& t, Diagnostics& diags) {
  // The checks of the runtime that makes them: bridge-probe and `none` runtimes build no
  // Megatron config.
  if (!runtime_is_megatron_bridge(r.runtime)) return;
  check_linear_bias(r, t, diags);
  check_cuda_graphs(r, diags);
  check_transformer_engine(r, diags);
}

}  // namespace overlap_detail

}  // namespace bridge
