#include "model/topology.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

#include "base/suggest.h"

namespace bridge {

namespace {

// The recipe base splits its layers unevenly over the pipeline stages (a layout, stages that
// account for the embedding or the loss, a first or last stage of its own size): a split
// bridge-launch does not model. The runtime checks it; the plan says so, and only as a
// warning when the user changed what the split depends on.
void uneven_split_unchecked(const Recipe& r, int64_t layers, int64_t stages, Diagnostics& diags) {
  const ModelSpec& m = r.model;
  bool changed = user_set(m.num_layers) || user_set(m.pipeline_model_parallel_size) ||
                 user_set(m.virtual_pipeline_model_parallel_size);
  std::string message = fmt::format(
      "num_layers ({}) is not a multiple of pp*vpp ({}): the recipe base {} splits the layers "
      "unevenly ({}), which bridge-launch does not check; the runtime does",
      layers, stages, r.base.function, r.base.uneven_pipeline_split);
  if (changed)
    diags.warning("uneven-pipeline-split-unchecked", "model.num_layers", m.num_layers.loc,
                  message + " with the values changed here",
                  "run `--runtime-check` with the job's Python to check the split before "
                  "submitting");
  else
    diags.info("uneven-pipeline-split", "model.num_layers", m.num_layers.loc, message);
}

// Location of the value that decided a size: the field when set, else the cluster section.
SourceLoc loc_or(const Field<int64_t>& f, const SourceLoc& fallback) {
  return f.is_set() ? f.loc : fallback;
}

// a*b*c, or nullopt when it does not fit in int64 (sizes are user input: 2^32 * 2^32 wraps
// to 0, and `n % 0` would kill the process).
std::optional<int64_t> product(std::initializer_list<int64_t> factors) {
  int64_t p = 1;
  for (int64_t f : factors)
    if (__builtin_mul_overflow(p, f, &p)) return std::nullopt;
  return p;
}

void too_large(Diagnostics& diags, const char* path, const SourceLoc& loc,
               const std::string& what) {
  diags.error("size-too-large", path, loc,
              fmt::format("{} is too large (does not fit in a 64-bit integer)", what),
              "use realistic parallel sizes");
}

// Looks the GPU up in the table; a GPU the table lacks must be declared with cluster.gpu_arch,
// because perf_env's env decisions depend on the architecture (a typo must not silently get
// Hopper settings on a Blackwell machine or the reverse).
bool resolve_gpu(const ClusterSpec& c, Topology& t, Diagnostics& diags) {
  if (t.gpu.empty()) return true;
  const GpuType* known = find_gpu(t.gpu);
  GpuArch declared{};
  bool has_declared = c.gpu_arch.is_set() && parse_arch(*c.gpu_arch.value, declared);
  if (known) {
    t.arch = known->arch;
    t.nvlink_domain = known->nvlink_domain;
    if (has_declared && declared != known->arch)
      diags.error("gpu-arch-contradicts-table", "cluster.gpu_arch", c.gpu_arch.loc,
                  fmt::format("cluster.gpu_arch is {}, but {} is a {} GPU", *c.gpu_arch.value,
                              t.gpu, arch_name(known->arch)),
                  "drop cluster.gpu_arch: it is only for GPUs bridge-launch does not know");
    return !(has_declared && declared != known->arch);
  }
  if (has_declared) {
    t.arch = declared;
    return true;
  }
  diags.error("unknown-gpu", "cluster.gpu", c.gpu.loc,
              fmt::format("unknown GPU type `{}`{}", t.gpu, did_you_mean(t.gpu, gpu_names())),
              fmt::format("known types: {}; for another GPU declare its architecture with "
                          "cluster.gpu_arch: ampere|hopper|blackwell|rubin",
                          fmt::join(gpu_names(), ", ")));
  return false;
}

// A cluster whose nodes hold another count (cluster.gpus_per_node_max) fills its nodes.
int64_t default_gpus_per_node(const ClusterSpec& c, const Topology& t) {
  const GpuType* known = find_gpu(t.gpu);
  int64_t per_node = known ? known->default_gpus_per_node : 8;
  return std::min<int64_t>(t.num_gpus, c.gpus_per_node_max.get_or(per_node));
}

// GPUs one node can hold: cluster.gpus_per_node_max where the cluster's nodes are unusual,
// else the GPU table's node; 0 = not known (no GPU, a declared one, r100).
int64_t node_capacity(const ClusterSpec& c, const Topology& t) {
  if (c.gpus_per_node_max.is_set()) return *c.gpus_per_node_max.value;
  const GpuType* known = find_gpu(t.gpu);
  return known ? known->node_gpus : 0;
}

// gn above what one node holds would ask the scheduler for GPUs no node has (sbatch waits
// forever, or the job lands on a partial node): refused with the table's number.
bool check_node_capacity(const ClusterSpec& c, const Topology& t, Diagnostics& diags) {
  int64_t capacity = node_capacity(c, t);
  if (capacity == 0 || t.gpus_per_node <= capacity) return true;
  const auto& gn = c.gpus_per_node;
  if (c.gpus_per_node_max.is_set()) {
    diags.error("gpus-per-node-above-node", "cluster.gpus_per_node", gn.loc,
                fmt::format("gpus_per_node ({}) is more than cluster.gpus_per_node_max ({})",
                            t.gpus_per_node, capacity),
                fmt::format("use -gn {} or less, or raise cluster.gpus_per_node_max", capacity));
    return false;
  }
  auto fewer_nodes = t.num_gpus % capacity == 0
                         ? fmt::format(" (-ng {} -gn {} is {} node(s))", t.num_gpus, capacity,
                                       t.num_gpus / capacity)
                         : std::string();
  diags.error("gpus-per-node-above-node", "cluster.gpus_per_node", gn.loc,
              fmt::format("gpus_per_node ({}) is more than a {} node holds: {} GPUs per node "
                          "(the GPU table, docs/recipe.md)",
                          t.gpus_per_node, t.gpu, capacity),
              fmt::format("use -gn {} or less{}; for nodes with more GPUs than the table's, set "
                          "cluster.gpus_per_node_max",
                          capacity, fewer_nodes));
  return false;
}

}  // namespace

std::optional<Topology> compute_topology(const Recipe& r, Diagnostics& diags) {
  size_t errors_before = diags.count(Severity::kError);
  const ModelSpec& m = r.model;
  Topology t;
  t.gpu = r.cluster.gpu.get_or("");
  std::transform(t.gpu.begin(), t.gpu.end(), t.gpu.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  t.num_gpus = r.cluster.num_gpus.get_or(1);
  if (!resolve_gpu(r.cluster, t, diags)) return std::nullopt;
  t.gpus_per_node = r.cluster.gpus_per_node.get_or(default_gpus_per_node(r.cluster, t));
  t.node_gpus = node_capacity(r.cluster, t);
  if (!check_node_capacity(r.cluster, t, diags)) return std::nullopt;
  t.tp = m.tensor_model_parallel_size.get_or(1);
  t.pp = m.pipeline_model_parallel_size.get_or(1);
  t.vpp = m.virtual_pipeline_model_parallel_size.value;
  t.cp = m.context_parallel_size.get_or(1);
  t.ep = m.expert_model_parallel_size.get_or(1);
  t.etp = m.expert_tensor_parallel_size.get_or(t.tp);
  SourceLoc ng_loc = r.cluster.num_gpus.loc;

  // No real job has a parallel size above 2^20; bounding them keeps every product of three
  // sizes below within int64 range (no overflow, no division by a wrapped zero).
  constexpr int64_t kMaxSize = int64_t{1} << 20;
  for (auto [value, field] :
       {std::pair{&t.tp, &m.tensor_model_parallel_size},
        std::pair{&t.pp, &m.pipeline_model_parallel_size},
        std::pair{&t.cp, &m.context_parallel_size}, std::pair{&t.ep, &m.expert_model_parallel_size},
        std::pair{&t.etp, &m.expert_tensor_parallel_size}}) {
    if (*value <= kMaxSize) continue;
    diags.error("parallel-size-too-large", "model", loc_or(*field, ng_loc),
                fmt::format("a parallel size of {} cannot be used with num_gpus = {} "
                            "(tp*pp*cp and etp*ep*pp must divide the GPU count)",
                            *value, t.num_gpus),
                "choose parallel sizes whose product divides num_gpus, or raise -ng");
    return std::nullopt;
  }
  if (t.vp() > kMaxSize) {
    diags.error("parallel-size-too-large", "model.virtual_pipeline_model_parallel_size",
                m.virtual_pipeline_model_parallel_size.loc,
                fmt::format("virtual_pipeline_model_parallel_size {} is too large", t.vp()),
                "use a few virtual stages per pipeline stage (num_layers / (pp*vpp) layers "
                "each)");
    return std::nullopt;
  }
  // T1
  if (t.num_gpus % t.gpus_per_node != 0) {
    auto next_multiple = product({t.num_gpus / t.gpus_per_node + 1, t.gpus_per_node});
    diags.error("gpus-not-multiple-of-node", "cluster.num_gpus", ng_loc,
                fmt::format("num_gpus ({}) is not a multiple of gpus_per_node ({})", t.num_gpus,
                            t.gpus_per_node),
                next_multiple
                    ? fmt::format("use a multiple of {} GPUs (e.g. -ng {}), or change -gn",
                                  t.gpus_per_node, *next_multiple)
                    : fmt::format("use a multiple of {} GPUs, or change -gn", t.gpus_per_node));
  } else {
    t.nodes = t.num_gpus / t.gpus_per_node;
  }
  // T2
  std::optional<int64_t> model_parallel_size = product({t.tp, t.pp, t.cp});
  int64_t model_parallel = model_parallel_size.value_or(0);
  if (!model_parallel_size) {
    too_large(diags, "model.tensor_model_parallel_size",
              loc_or(m.tensor_model_parallel_size, ng_loc),
              fmt::format("tp*pp*cp = {}*{}*{}", t.tp, t.pp, t.cp));
  } else if (t.num_gpus % model_parallel != 0) {
    // Point at the parallel size the user wrote; the GPU count may be a default.
    SourceLoc where = ng_loc;
    for (const auto* f :
         {&m.context_parallel_size, &m.pipeline_model_parallel_size, &m.tensor_model_parallel_size})
      if (f->is_set() && !where.has_position() && !where.from_override()) where = f->loc;
    diags.error("dp-not-integral", "cluster.num_gpus", where,
                fmt::format("num_gpus ({}) is not divisible by tp*pp*cp = {}*{}*{} = {}",
                            t.num_gpus, t.tp, t.pp, t.cp, model_parallel),
                "data parallel size = num_gpus / (tp*pp*cp) must be a whole number >= 1");
  } else {
    t.dp = t.num_gpus / model_parallel;
  }
  // T3
  if (m.num_moe_experts.is_set()) {
    std::optional<int64_t> expert_group_size = product({t.etp, t.ep, t.pp});
    int64_t expert_group = expert_group_size.value_or(0);
    if (!expert_group_size)
      too_large(diags, "model.expert_model_parallel_size",
                loc_or(m.expert_model_parallel_size, ng_loc),
                fmt::format("etp*ep*pp = {}*{}*{}", t.etp, t.ep, t.pp));
    else if (t.num_gpus % expert_group != 0)
      diags.error("ep-not-integral", "model.expert_model_parallel_size",
                  loc_or(m.expert_model_parallel_size, ng_loc),
                  fmt::format("num_gpus ({}) is not a multiple of etp*ep*pp = {}*{}*{} = {}",
                              t.num_gpus, t.etp, t.ep, t.pp, expert_group),
                  fmt::format("choose expert_model_parallel_size so that etp*ep*pp divides {}, "
                              "or change -ng",
                              t.num_gpus));
    int64_t experts = *m.num_moe_experts.value;
    if (experts % t.ep != 0)
      diags.error("experts-not-multiple-of-ep", "model.num_moe_experts", m.num_moe_experts.loc,
                  fmt::format("num_moe_experts ({}) is not a multiple of "
                              "expert_model_parallel_size ({})",
                              experts, t.ep),
                  "each expert-parallel rank holds the same number of experts: choose an ep "
                  "that divides num_moe_experts");
  }
  // T4
  if (m.num_attention_heads.is_set() && *m.num_attention_heads.value % t.tp != 0)
    diags.error("heads-not-multiple-of-tp", "model.num_attention_heads", m.num_attention_heads.loc,
                fmt::format("num_attention_heads ({}) is not a multiple of tp ({})",
                            *m.num_attention_heads.value, t.tp),
                "tensor parallelism splits the heads evenly: choose a tp that divides "
                "num_attention_heads");
  // T5
  if (m.num_layers.is_set()) {
    int64_t layers = *m.num_layers.value;
    std::optional<int64_t> stage_count = product({t.pp, t.vp()});
    int64_t stages = stage_count.value_or(0);
    if (!stage_count)
      too_large(diags, "model.pipeline_model_parallel_size",
                loc_or(m.pipeline_model_parallel_size, m.num_layers.loc),
                fmt::format("pp*vpp = {}*{}", t.pp, t.vp()));
    else if (layers % stages != 0 && !r.base.uneven_pipeline_split.empty())
      uneven_split_unchecked(r, layers, stages, diags);
    else if (layers % stages != 0)
      diags.error("layers-not-multiple-of-pp", "model.num_layers", m.num_layers.loc,
                  t.vpp ? fmt::format("num_layers ({}) is not a multiple of pp*vpp = {}*{} = {}",
                                      layers, t.pp, *t.vpp, stages)
                        : fmt::format("num_layers ({}) is not a multiple of pp ({})", layers, t.pp),
                  "every pipeline stage (and virtual stage) holds the same number of layers: "
                  "choose pp (and vpp) dividing num_layers");
  }
  // T6
  if (t.vpp && t.pp == 1)
    diags.error("vpp-without-pp", "model.virtual_pipeline_model_parallel_size",
                m.virtual_pipeline_model_parallel_size.loc,
                "virtual_pipeline_model_parallel_size is set but pipeline_model_parallel_size is 1",
                "remove vpp, or set pipeline_model_parallel_size > 1");
  // T7: Megatron splits the global batch into micro-batches of every data-parallel rank;
  // it refuses a global batch that is not a multiple of micro_batch_size * dp at start-up.
  const TrainSpec& tr = r.train;
  if (t.dp > 0 && tr.global_batch_size.is_set() && tr.micro_batch_size.is_set()) {
    int64_t gbs = *tr.global_batch_size.value, mbs = *tr.micro_batch_size.value;
    std::optional<int64_t> per_step = product({mbs, t.dp});
    if (per_step && gbs % *per_step != 0)
      diags.error(
          "batch-not-divisible", "train.global_batch_size", tr.global_batch_size.loc,
          fmt::format("global_batch_size ({}) is not a multiple of micro_batch_size * dp "
                      "= {}*{} = {}",
                      gbs, mbs, t.dp, *per_step),
          fmt::format("use a global batch that is a multiple of {} (e.g. {}), or change "
                      "micro_batch_size",
                      *per_step, product({gbs / *per_step + 1, *per_step}).value_or(*per_step)));
  }
  if (m.sequence_parallel.get_or(false) && t.tp == 1)
    diags.warning("sequence-parallel-without-tp", "model.sequence_parallel",
                  m.sequence_parallel.loc, "sequence_parallel has no effect with tp == 1",
                  "drop sequence_parallel or raise tensor_model_parallel_size");

  if (diags.count(Severity::kError) > errors_before) return std::nullopt;
  return t;
}

bool path_at_or_below(std::string_view dir, std::string_view root) {
  if (dir == root || root == "/") return dir == root || (!dir.empty() && dir.front() == '/');
  return dir.size() > root.size() && dir.substr(0, root.size()) == root && dir[root.size()] == '/';
}

bool on_node_local_storage(std::string_view dir) {
  for (std::string_view local : {"/tmp", "/var/tmp", "/dev/shm", "/run"})
    if (path_at_or_below(dir, local)) return true;
  return false;
}

}  // namespace bridge
