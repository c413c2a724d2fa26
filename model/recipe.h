// Recipe: the typed, validated content of one recipe YAML file plus its overrides.
//
// Produced by load_recipe (recipe_loader.h); every other stage reads it and never changes
// it. Each optional value is a Field<T>: unset (null or absent in the YAML: "let the rules
// decide") or set, with the location it came from so later stages can point at it. Free-form
// parts (plugin options, an inline userbuffers mapping) stay YamlNode trees for their owners
// to validate.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/diagnostics.h"
#include "base/yaml_tree.h"

namespace bridge {

template <class T>
struct Field {
  std::optional<T> value;
  SourceLoc loc;  // where the value was written; empty when unset

  bool is_set() const { return value.has_value(); }
  T get_or(T fallback) const { return value.value_or(std::move(fallback)); }
};

using StringList = std::vector<std::string>;

struct ClusterSpec {
  Field<std::string> gpu;
  Field<std::string> gpu_arch;  // declares a GPU missing from the GPU table (gpu_table.h)
  Field<int64_t> num_gpus;
  Field<int64_t> gpus_per_node;
  // GPUs the cluster's nodes hold, where they differ from the GPU table's node (a larger -gn
  // is refused without it); the table's NUMA rule then gives way to sysfs at run time.
  Field<int64_t> gpus_per_node_max;
};

struct ModelSpec {
  Field<std::string> family;  // Megatron-Bridge model family (run_script.py -m)
  Field<std::string> recipe;  // Megatron-Bridge recipe name (run_script.py -mr)
  // run_script.py --config_variant: which flat recipe of the name (v1/v2 = the canonical one).
  Field<std::string> config_variant;
  Field<int64_t> seq_length;
  Field<int64_t> tensor_model_parallel_size;
  Field<int64_t> pipeline_model_parallel_size;
  Field<int64_t> virtual_pipeline_model_parallel_size;
  Field<int64_t> context_parallel_size;
  Field<int64_t> expert_model_parallel_size;
  Field<int64_t> expert_tensor_parallel_size;
  Field<bool> sequence_parallel;
  Field<int64_t> num_layers;
  Field<int64_t> hidden_size;
  Field<int64_t> num_attention_heads;
  Field<int64_t> num_moe_experts;
  Field<std::string> moe_token_dispatcher_type;
  Field<std::string> moe_flex_dispatcher_backend;
  Field<bool> moe_shared_expert_overlap;
  Field<int64_t> moe_shared_expert_intermediate_size;
  Field<bool> moe_permute_fusion;
  Field<int64_t> mtp_num_layers;
  Field<std::string> precision;
  Field<std::string> compute_dtype;
  Field<std::string> recompute_granularity;
  Field<std::string> recompute_method;
  Field<int64_t> recompute_num_layers;
  Field<StringList> recompute_modules;
  Field<bool> gradient_accumulation_fusion;
  Field<bool> add_bias_linear;
  Field<bool> add_qkv_bias;
  Field<std::string> cuda_graph_impl;
  Field<StringList> cuda_graph_scope;
  Field<bool> overlap_moe_expert_parallel_comm;
};

// The user's comm_overlap section (U in docs/overlap.md): null/absent = unset.
struct CommOverlapSpec {
  Field<bool> tp_comm_overlap;
  Field<YamlNode> tp_comm_overlap_cfg;  // a preset name (scalar) or a per-layer mapping
  Field<std::string> tp_comm_bootstrap_backend;
  Field<bool> overlap_p2p_comm;
  Field<bool> batch_p2p_comm;
  Field<bool> overlap_grad_reduce;
  Field<bool> overlap_param_gather;
  Field<bool> overlap_param_gather_with_optimizer_step;
  Field<bool> align_param_gather;
  Field<int64_t> bucket_size;
  Field<bool> defer_embedding_wgrad_compute;
  Field<int64_t> wgrad_deferral_limit;
  Field<bool> overlap_moe_expert_parallel_comm;
  Field<bool> delay_wgrad_compute;
};

struct DdpSpec {
  Field<bool> use_distributed_optimizer;
  Field<bool> overlap_grad_reduce;
  Field<bool> overlap_param_gather;
  Field<bool> align_param_gather;
  Field<int64_t> bucket_size;
};

struct OptimizerSpec {
  Field<bool> overlap_param_gather_with_optimizer_step;
};

struct MixedPrecisionSpec {
  Field<bool> grad_reduce_in_fp32;
  Field<bool> fp8_param_gather;
};

struct TrainSpec {
  Field<int64_t> global_batch_size;
  Field<int64_t> micro_batch_size;
  Field<int64_t> max_steps;
  Field<std::string> task;  // pretrain | sft | peft | lora (run_script.py --task)
  // run_script.py's tokenizer flags: a fresh tokenizer config replaces the recipe's.
  Field<std::string> tokenizer_type;
  Field<int64_t> vocab_size;
  Field<std::string> tokenizer_model;
};

// checkpoint: where the job saves and resumes (docs/long-jobs.md). The runtime adapters plan it
// into the runtime's own keys (Megatron-Bridge's checkpoint.save/load/save_interval/
// most_recent_k/async_save); every attempt of the job loads the newest complete checkpoint.
struct CheckpointSpec {
  Field<std::string> dir;   // absolute, on storage every node of the job shares
  Field<int64_t> interval;  // iterations between saves
  Field<int64_t> keep;      // how many of the newest checkpoints to keep; unset = all
  Field<bool> async_save;   // the runtime writes in the background
  bool is_set() const { return dir.is_set(); }
};

// runtime.transformer_engine: a version string, `false` (TE absent) or absent (unknown).
struct TeSpec {
  bool present = true;
  std::string version;  // "" = unknown
};

// runtime.check: the plan through the config code of the Megatron-Bridge installed in a Python
// (plan/runtime_check.h); off unless `python` is set here or by --runtime-check.
struct RuntimeCheckSpec {
  Field<std::string> python;
  Field<int64_t> timeout;  // seconds
};

// runtime.watchdog: when a job that stopped printing iteration lines is ended
// (model/watchdog.h); every field in seconds, unset = the default shown in `plan`.
struct WatchdogSpec {
  Field<bool> enabled;
  Field<int64_t> startup_timeout;   // launch -> first iteration line
  Field<int64_t> progress_timeout;  // one iteration line -> the next
  Field<int64_t> teardown_grace;    // last iteration line (train_iters reached) -> exit
};

// runtime.code: a local source tree shipped into the job (plan/code_plan.h). `section` is
// where the section was written; unset when the recipe has none.
struct CodeSpec {
  SourceLoc section;
  Field<std::string> path;            // the tree on the submitting host
  Field<std::string> mode;            // snapshot | mount
  Field<std::string> container_path;  // where the ranks see it inside a container
  Field<std::string> python_path;     // the tree's directory put on PYTHONPATH (no container)
  Field<StringList> include;          // patterns of files to ship (required outside git)
  Field<int64_t> max_size_mb;         // a snapshot larger than this is refused
  Field<std::string> snapshot_dir;    // Kubernetes: the host directory snapshots go to
  bool is_set() const { return path.is_set() || section.has_position(); }
};

struct RuntimeSpec {
  Field<std::string> adapter;   // how the plan reaches the runtime (runtime_adapter.h)
  Field<std::string> launcher;  // srun | torchrun | direct
  Field<StringList> command;
  Field<StringList> args;
  Field<bool> pass_overrides;
  Field<std::string> container_image;
  Field<std::string> workdir;
  Field<TeSpec> transformer_engine;
  Field<std::string> torch;
  // Whose log carries the iteration lines --wait follows: "last", "first" or a rank number.
  Field<std::string> progress_rank;
  RuntimeCheckSpec check;
  WatchdogSpec watchdog;
  // The job's runtime confirms at start that it built the planned config (plan/plan_confirm.h);
  // unset = on where the adapter and executor allow it.
  Field<bool> confirm;
  // numa | none | custom: how each rank is bound to its GPU's NUMA node (model/placement.h).
  Field<std::string> binding;
  CodeSpec code;
};

struct PluginEntry {
  std::string name;
  SourceLoc loc;
  YamlNode options;  // a mapping (possibly empty)
};

struct EnvEntry {
  std::string name;
  std::string value;
  bool secret = false;
  bool expand = false;  // opt-in shell expansion on the rank
  SourceLoc loc;
};

struct LocalExecutorSpec {
  Field<std::string> job_dir;
  Field<int64_t> grace_period;  // seconds between SIGTERM and SIGKILL
  Field<int64_t> timeout;       // seconds; 0 = none
};

struct SlurmExecutorSpec {
  Field<std::string> account;
  Field<std::string> partition;
  Field<std::string> time;
  Field<std::string> qos;
  Field<std::string> mem;
  Field<StringList> container_mounts;
  Field<std::string> container_workdir;
  Field<bool> exclusive;
  Field<std::string> job_dir;
  Field<std::string> dependency;
  Field<StringList> sbatch_args;
  Field<StringList> srun_args;  // raw options for the ranks' srun, after the generated ones
  Field<int64_t> segment;       // nodes per NVLink-domain block (sbatch --segment); 0 = none
  Field<int64_t> retries;
  // Which failures are retried (model/retry_policy.h class ids; default: the transient ones)
  // and whether the next attempt excludes the node the failure was blamed on (default true).
  Field<StringList> retry_on;
  Field<bool> exclude_failed_nodes;
  Field<std::string> template_path;
};

struct KubernetesExecutorSpec {
  Field<std::string> namespace_;
  Field<std::string> context;
  Field<std::string> api;               // jobset | job | trainjob
  Field<std::string> training_runtime;  // api trainjob: the ClusterTrainingRuntime it names
  Field<int64_t> retries;
  Field<bool> exclude_failed_nodes;  // Job API: the next attempt stays off the blamed node
  Field<std::string> secret_name;
  Field<std::string> shm_size;
  Field<std::string> service_account;
  Field<StringList> image_pull_secrets;
  Field<std::string> job_dir;
  // What a GPU cluster's pods need beyond the plan, checked at render time
  // (executors/k8s_pod_spec.h documents each shape):
  Field<YamlNode> volumes;        // [{name, mount_path, read_only, pvc|host_path|config_map}]
  Field<YamlNode> node_selector;  // {label: value}
  Field<YamlNode> tolerations;    // [Kubernetes Toleration]
  Field<YamlNode> affinity;       // a Kubernetes Affinity, passed through
  Field<YamlNode> resources;      // {requests: {name: quantity}, limits: {...}} besides GPUs
  Field<YamlNode> labels;         // {key: value}, on every object and pod
  Field<YamlNode> annotations;    // {key: value}, on every object and pod
  Field<std::string> priority_class;
  Field<std::string> queue;   // Kueue LocalQueue: label kueue.x-k8s.io/queue-name
  Field<YamlNode> pod_patch;  // strategic merge patch of the pod template
  // What a cluster admin checks in a pod (executors/k8s_pod_shape.h documents each):
  Field<YamlNode> node;      // one GPU node's allocatable {cpu, memory, ephemeral_storage}
  Field<std::string> qos;    // burstable | guaranteed
  Field<YamlNode> security;  // {run_as_user, run_as_group, run_as_non_root, add_capabilities}
  Field<YamlNode> network;   // none | rdma | {type, resource, per_pod, nccl_*} (k8s_network.h)
  Field<std::string> time;   // the Jobs' active deadline, written as Slurm's time limit
  Field<int64_t> ttl_after_finished;  // seconds a finished job's objects are kept
  // NVLink-domain placement (model/placement.h): nodes per block, the node label naming a
  // node's domain, and whether the scheduler must (required) or should (preferred) keep it.
  Field<int64_t> segment;
  Field<std::string> topology_label;
  Field<std::string> topology;  // required | preferred
};

struct ExecutorSpec {
  Field<std::string> default_executor;
  LocalExecutorSpec local;
  SlurmExecutorSpec slurm;
  KubernetesExecutorSpec kubernetes;
};

// The recipe base (model/recipe_base.h): the runtime's own recipe that the plan names, whose
// values stand for every key the user leaves unset.
struct RecipeBaseInfo {
  std::string function;            // e.g. qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config; "" = none
  std::string release;             // the release whose recipe it is, e.g. "Megatron-Bridge 0.6.2"
  std::string unknown_because;     // a base is named but its values are not known here
  bool comm_overlap_null = false;  // the recipe has no comm_overlap section (None)
  // How the recipe splits layers unevenly over pipeline stages (e.g.
  // "account_for_embedding_in_pipeline_split,account_for_loss_in_pipeline_split"); "" = evenly.
  std::string uneven_pipeline_split;
  // The recipe's optimizer is precision-aware (Megatron-Core allows that only with the
  // distributed optimizer).
  bool precision_aware_optimizer = false;
  // Some of the model's layers are dense (its moe_layer_freq is not 1, or its pattern has a 0):
  // Megatron-Core refuses an `mlp` CUDA graph on an MoE model where every layer is MoE.
  bool moe_dense_layers = false;
  // The keys whose value the base gave, with that value as the table writes it; table order.
  std::vector<std::pair<std::string, std::string>> filled;
};

struct Recipe {
  std::string file;  // path as given
  Field<std::string> name;
  Field<std::string> description;
  ClusterSpec cluster;
  ModelSpec model;
  CommOverlapSpec comm_overlap;
  DdpSpec ddp;
  OptimizerSpec optimizer;
  MixedPrecisionSpec mixed_precision;
  TrainSpec train;
  CheckpointSpec checkpoint;
  RuntimeSpec runtime;
  std::vector<PluginEntry> plugins;  // in recipe order
  std::vector<EnvEntry> env;         // recipe env:, in order
  ExecutorSpec executor;
  std::vector<std::string> overrides;  // the KEY=VALUE arguments applied, in order
  // Every input after overrides as "section.key" -> value text (see flatten_recipe_inputs);
  // kept from the load so that recording a job does not parse the file a second time.
  std::map<std::string, std::string> inputs;
  // Where each of `inputs` was written: its recipe line, or the override that set it.
  std::map<std::string, SourceLoc> input_locations;
  RecipeBaseInfo base;
};

// Set by the user: in the recipe file or by an override, not filled in by the recipe base.
template <class T>
bool user_set(const Field<T>& f) {
  return f.is_set() && !f.loc.from_base();
}

}  // namespace bridge
