// starter_recipe: the text `bridge-launch init` writes (starter_recipe.h).
#include "launcher/starter_recipe.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <string_view>
#include <vector>

#include "base/suggest.h"
#include "model/executor_kind.h"
#include "model/gpu_table.h"
#include "model/recipe.h"

namespace bridge {

namespace {

// Writes `key: value` lines with their comments aligned in one column.
class Writer {
 public:
  void comment(const std::string& text) { out_ += text.empty() ? "#\n" : "# " + text + "\n"; }
  void blank() { out_ += "\n"; }
  void raw(const std::string& line) { out_ += line + "\n"; }
  void key(int indent, const std::string& entry, const std::string& why) {
    std::string line = std::string(static_cast<size_t>(indent) * 2, ' ') + entry;
    if (!why.empty()) {
      line.resize(std::max<size_t>(line.size() + 1, 40), ' ');
      line += "# " + why;
    }
    out_ += line + "\n";
  }
  const std::string& text() const { return out_; }

 private:
  std::string out_;
};

struct Layout {
  int64_t ng = 1, gn = 1, tp = 1, ep = 1, dp = 1;
};

const char* yes_no(bool b) { return b ? "true" : "false"; }

void header(Writer& w, const StarterChoices& c, const Layout& l) {
  bool moe = c.shape == "moe";
  w.comment(fmt::format("Starter recipe: {} model on {} x {} ({} node{} of {}), {} executor.",
                        moe ? "an MoE (Qwen3-30B-A3B-shaped)" : "a dense (Llama-3-8B-shaped)", l.ng,
                        c.gpu, l.ng / l.gn, l.ng / l.gn == 1 ? "" : "s", l.gn, c.executor));
  if (!c.command_line.empty()) w.comment("Written by: " + c.command_line);
  w.comment("");
  w.comment("It is valid as written. Next steps:");
  w.comment("  bridge-launch validate THIS.yaml      # diagnostics only; exit 0 = ready");
  w.comment("  bridge-launch plan THIS.yaml          # layout, resolved overlap, env, argv");
  w.comment("  bridge-launch --dry-run THIS.yaml     # exactly what would be submitted");
  w.comment("  bridge-launch advise THIS.yaml        # overlap knobs to try, and how to measure");
  w.comment("Keys marked CHANGE name things only you know (account, image, ...). Every key is");
  w.comment("described in docs/recipe.md, the overlap rules (M, D, E) in docs/overlap.md.");
  w.comment("null means unset: the runtime's default, or the overlap rules decide.");
  w.blank();
  w.key(0, moe ? "name: qwen3-30b-a3b-moe" : "name: llama3-8b-dense",
        "job name: Slurm job name, pod names, job dir");
  w.key(
      0,
      fmt::format("description: {} starter, {} GPUs, {}", moe ? "MoE" : "dense", l.ng, c.executor),
      "free text, shown by plan and list");
  w.blank();
  w.raw("cluster:");
  w.key(1, "gpu: " + c.gpu, "GPU type (docs/recipe.md, GPU table); -g overrides");
  w.key(1, fmt::format("num_gpus: {}", l.ng), "total GPUs (ng); -ng overrides");
  w.key(1, fmt::format("gpus_per_node: {}", l.gn), "GPUs per node (gn); ng must divide by it");
  w.blank();
}

// The published model each shape is modelled on (the header names it): the values its keys
// take in the model section.
struct StarterModel {
  const char* family;
  const char* recipe;
  int seq_length;
  int num_layers;
  int hidden_size;
};
constexpr StarterModel kLlama3_8b{"llama", "llama3_8b", 8192, 32, 4096};
constexpr StarterModel kQwen3_30bA3b{"qwen", "qwen3_30b_a3b", 4096, 48, 2048};

// One model section for both shapes, the keys in one order. MoE adds its expert keys, and a
// few keys are commented for the shape (MoE: what EP overlap needs of them).
void model(Writer& w, const Layout& l, bool moe) {
  const StarterModel& m = moe ? kQwen3_30bA3b : kLlama3_8b;
  w.raw("model:");
  w.key(1, fmt::format("family: {}", m.family), "Megatron-Bridge model family (run_script.py -m)");
  w.key(1, fmt::format("recipe: {}", m.recipe), "Megatron-Bridge recipe (run_script.py -mr)");
  w.key(1, fmt::format("seq_length: {}", m.seq_length), "sequence length (-sl)");
  w.key(1, fmt::format("tensor_model_parallel_size: {}", l.tp),
        moe ? "tp: splits each layer over GPUs" : "tp: splits each layer over GPUs of a node");
  w.key(1, "pipeline_model_parallel_size: 1",
        moe ? "pp; with pp > 1 EP overlap needs a vpp" : "pp: splits the layers into stages");
  w.key(1, "virtual_pipeline_model_parallel_size: null", "vpp (interleaving); only with pp > 1");
  w.key(1, "context_parallel_size: 1", "cp: splits the sequence");
  if (moe) {
    w.key(1, fmt::format("expert_model_parallel_size: {}", l.ep),
          "ep: experts spread over GPUs; divides num_moe_experts");
    w.key(1, "expert_tensor_parallel_size: 1", "etp: tp inside each expert");
  }
  w.key(1, fmt::format("sequence_parallel: {}", yes_no(l.tp > 1)),
        moe ? "needs tp > 1" : "needs tp > 1; required by TP overlap");
  w.key(1, fmt::format("num_layers: {}", m.num_layers), "must divide by pp (and pp * vpp)");
  w.key(1, fmt::format("hidden_size: {}", m.hidden_size),
        "selects userbuffers presets (TP overlap)");
  w.key(1, "num_attention_heads: 32", "must divide by tp");
  if (moe) {
    w.key(1, "num_moe_experts: 128", "set = an MoE model (rule T3)");
    w.key(1, "moe_token_dispatcher_type: alltoall", "EP overlap needs alltoall or flex");
    w.key(1, "moe_shared_expert_overlap: false", "exclusive with EP overlap");
    w.key(1, "mtp_num_layers: null", "EP overlap allows null, 0 or 1");
  }
  w.key(1, "precision: bf16", moe ? "EP overlap needs bf16 or fp16" : "bf16 | fp16 | fp32");
  w.key(1, "compute_dtype: bf16", "GEMM type: bf16 | fp8_cs | fp8_mx | ...");
  w.key(1, "recompute_granularity: null",
        moe ? "null | selective; full conflicts with EP overlap"
            : "activation recompute: null | selective | full");
  w.key(1, "gradient_accumulation_fusion: true", "fused weight-gradient accumulation");
  w.blank();
}

// The overlap request: the shape's own overlap (MoE: EP, dense: TP) written off until the run
// is stable; DP overlap left to the rules for both.
void comm_overlap(Writer& w, const Layout& l, bool moe) {
  w.raw("comm_overlap:                           # the overlap request (docs/overlap.md)");
  if (moe) {
    w.key(1, "overlap_moe_expert_parallel_comm: false",
          l.ep > 1 ? "EP overlap (M3): turn on once the run is stable"
                   : "EP overlap needs ep > 1 (more GPUs)");
    w.key(1, "delay_wgrad_compute: false", "only with EP overlap on (M4)");
  } else {
    w.key(1, "tp_comm_overlap: false",
          l.tp > 1 ? "TP overlap (M1): turn on once the run is stable"
                   : "TP overlap needs tp >= 2 and sequence_parallel");
    w.key(1, "tp_comm_overlap_cfg: null", "userbuffers preset or mapping (M6)");
  }
  w.key(1, "overlap_grad_reduce: null", "DP overlap: null = rules D1/D2 decide");
  w.key(1, "overlap_param_gather: null", "DP overlap: null = rules D1/D2 decide");
  w.blank();
}

void training(Writer& w, const StarterChoices& c, const Layout& l) {
  w.raw("ddp:");
  w.key(1, "use_distributed_optimizer: true",
        l.dp > 1 ? fmt::format("dp {} > 1: grad-reduce/param-gather overlap on (D1)", l.dp)
                 : "shards optimizer state; DP overlap needs it");
  w.blank();
  w.raw("train:");
  w.key(1, "task: pretrain", "pretrain | sft | peft | lora (run_script.py --task)");
  // A multiple of dp (micro batch 1), near 128 sequences per step.
  int64_t gbs = l.dp >= 128 ? l.dp : l.dp * (128 / l.dp);
  w.key(1, fmt::format("global_batch_size: {}", gbs), "sequences per step; divides by dp * mbs");
  w.key(1, "micro_batch_size: 1", "sequences per GPU per micro-batch");
  w.key(1, "max_steps: 100", "training steps; ablate compares steps 3-8");
  w.blank();
  const GpuType* g = find_gpu(c.gpu);
  bool megatron_bridge = g && g->megatron_bridge_name;
  w.raw("runtime:                                # what every rank runs");
  if (megatron_bridge) {
    w.key(1, "adapter: megatron_bridge", "run_script.py flags, then Hydra overrides");
    w.key(1, "command: [python, /opt/Megatron-Bridge/scripts/performance/run_script.py]",
          "in the image");
  } else {
    w.key(1, "adapter: hydra",
          fmt::format("run_script.py refuses -g {}: section.key=value args", c.gpu));
    w.key(1, "command: [python, pretrain.py]", "CHANGE: your training script");
  }
  const ExecutorKind* kind = find_executor_kind(c.executor);
  if (kind && !kind->ranks_in_image)  // the local executor would warn that it is not applied
    w.raw("  # container_image: nvcr.io/nvidia/nemo:25.11  # with --executor slurm/kubernetes");
  else
    w.key(1, "container_image: nvcr.io/nvidia/nemo:25.11", "CHANGE: your container image");
  w.key(1, "transformer_engine: \"2.9.0\"", "CHANGE: the image's TE version (quoted)");
  w.key(1, "torch: \"2.9.0\"", "CHANGE: the image's torch version (quoted)");
  w.blank();
  w.raw("plugins:                                # `bridge-launch plugins` lists them all");
  w.key(1, "perf_env: {}", "derives CUDA_DEVICE_MAX_CONNECTIONS, NVTE_* from the plan");
  w.blank();
  w.raw("env:                                    # extra launch env; -E KEY=VALUE wins");
  w.key(1, "NCCL_DEBUG: WARN", "NCCL's log level: INFO to debug hangs");
  w.blank();
}

// The starter's executor.<name> section: one row per executor (tests/init_test.cpp checks
// that every executor has one).
struct StarterKey {
  int indent;
  const char* entry;
  const char* why;
};
struct StarterSection {
  std::string_view executor;
  std::vector<StarterKey> keys;
};

const std::vector<StarterSection>& starter_sections() {
  static const std::vector<StarterSection> kSections{
      {"local",
       {{1, "local:", "ranks run on this machine (one node)"},
        {2, "grace_period: 5", "seconds from SIGTERM to SIGKILL on stop"},
        {2, "timeout: 0", "stop after N seconds; 0 = no limit"}}},
      {"slurm",
       {{1, "slurm:", "sbatch; `--dry-run` prints the script"},
        {2, "account: my-account", "CHANGE: #SBATCH --account"},
        {2, "partition: batch", "CHANGE: #SBATCH --partition"},
        {2, "time: \"01:00:00\"", "wall-clock limit (quoted)"},
        {2, "exclusive: true", "whole nodes"},
        {2, "job_dir: ~/bridge-launch/jobs", "logs; on the shared file system"}}},
      {"kubernetes",
       {{1, "kubernetes:", "a JobSet; `--dry-run` prints the manifests"},
        {2, "api: jobset", "jobset | job (Indexed Job + Service)"},
        {2, "shm_size: 64Gi", "memory-backed /dev/shm for NCCL"},
        {2, "job_dir: /workspace/bridge-launch/jobs", "inside the pods; mount a volume to keep"}}},
  };
  return kSections;
}

void executor(Writer& w, const StarterChoices& c) {
  w.raw("executor:");
  w.key(1, "default: " + c.executor, "-e/--executor picks another");
  for (const auto& section : starter_sections())
    if (section.executor == c.executor)
      for (const auto& k : section.keys) w.key(k.indent, k.entry, k.why);
}

int64_t largest_power_of_two_dividing(int64_t n, int64_t at_most) {
  int64_t p = 1;
  while (p * 2 <= at_most && n % (p * 2) == 0) p *= 2;
  return p;
}

}  // namespace

StarterRecipe starter_recipe(const StarterChoices& c) {
  StarterRecipe out;
  if (c.shape != "dense" && c.shape != "moe") {
    out.problem =
        fmt::format("unknown shape `{}`{}", c.shape, did_you_mean(c.shape, {"dense", "moe"}));
    out.help = "use --shape dense or --shape moe";
    return out;
  }
  const auto& executors = executor_names();
  if (std::find(executors.begin(), executors.end(), c.executor) == executors.end()) {
    out.problem =
        fmt::format("unknown executor `{}`{}", c.executor, did_you_mean(c.executor, executors));
    out.help = fmt::format("choose one of: {}", fmt::join(executors, ", "));
    return out;
  }
  const GpuType* gpu = find_gpu(c.gpu);
  if (!gpu) {
    out.problem = fmt::format("unknown GPU type `{}`{}", c.gpu, did_you_mean(c.gpu, gpu_names()));
    out.help = fmt::format("choose one of: {}", fmt::join(gpu_names(), ", "));
    return out;
  }
  if (c.num_gpus < 0 || c.gpus_per_node < 0) {
    out.problem = "-ng and -gn must be positive";
    out.help = "e.g. -ng 16 -gn 8";
    return out;
  }
  Layout l;
  l.gn = c.gpus_per_node ? c.gpus_per_node : gpu->default_gpus_per_node;
  l.ng = c.num_gpus ? c.num_gpus : l.gn;
  if (!c.gpus_per_node) l.gn = std::min(l.gn, l.ng);
  if (l.ng % l.gn != 0) {
    out.problem = fmt::format("-ng {} is not a multiple of the GPUs per node ({})", l.ng, l.gn);
    out.help =
        fmt::format("use -ng {} or {}, or set -gn", l.ng / l.gn * l.gn, (l.ng / l.gn + 1) * l.gn);
    return out;
  }
  const ExecutorKind* kind = find_executor_kind(c.executor);
  if (kind && kind->runs_here && l.ng > l.gn) {
    out.problem =
        fmt::format("the local executor runs on this machine only, but -ng {} is {} nodes of {}",
                    l.ng, l.ng / l.gn, l.gn);
    out.help = "use -ng <= -gn, or --executor slurm / kubernetes";
    return out;
  }
  if (c.shape == "moe") {
    l.ep = largest_power_of_two_dividing(l.ng, 128);
    l.dp = l.ng;
  } else {
    l.tp = l.gn % 2 == 0 ? 2 : 1;
    l.dp = l.ng / l.tp;
  }
  Writer w;
  header(w, c, l);
  model(w, l, c.shape == "moe");
  comm_overlap(w, l, c.shape == "moe");
  training(w, c, l);
  executor(w, c);
  out.text = w.text();
  return out;
}

}  // namespace bridge
