#include "probe/options.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <utility>

#include "probe/probe_error.h"

namespace bridge::probe {

std::optional<int64_t> parse_int64(std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto result = std::from_chars(text.data(), end, value);
  if (text.empty() || result.ec != std::errc() || result.ptr != end) return std::nullopt;
  return value;
}

namespace {

std::optional<double> to_double(std::string_view text) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto result = std::from_chars(text.data(), end, value);
  if (text.empty() || result.ec != std::errc() || result.ptr != end || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

ProbeResult<int64_t> int_flag(std::string_view name, std::string_view text, int64_t min,
                              int64_t max) {
  const auto value = parse_int64(text);
  if (!value || *value < min || *value > max) {
    return ProbeStatus(
        kExitUsage,
        str_printf("%.*s: expected an integer in [%lld, %lld], got '%.*s'",
                   static_cast<int>(name.size()), name.data(), static_cast<long long>(min),
                   static_cast<long long>(max), static_cast<int>(text.size()), text.data()));
  }
  return *value;
}

ProbeResult<double> double_flag(std::string_view name, std::string_view text, double min,
                                double max) {
  const auto value = to_double(text);
  if (!value || *value < min || *value > max) {
    return ProbeStatus(kExitUsage, str_printf("%.*s: expected a number in [%g, %g], got '%.*s'",
                                              static_cast<int>(name.size()), name.data(), min, max,
                                              static_cast<int>(text.size()), text.data()));
  }
  return *value;
}

// Returns the variable's value, treating an empty value as unset.
std::optional<std::string> env_var(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

struct EnvInt {
  int64_t value;
  const char* name;
};

// The first of `names` that is set, parsed as an integer (nullopt when none is set).
ProbeResult<std::optional<EnvInt>> first_int_env(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const auto text = env_var(name);
    if (!text) continue;
    const auto value = parse_int64(*text);
    if (!value) {
      return ProbeStatus(kExitUsage, str_printf("%s='%s' is not an integer", name, text->c_str()));
    }
    return std::optional<EnvInt>(EnvInt{*value, name});
  }
  return std::optional<EnvInt>();
}

constexpr int64_t kMaxInt = 1 << 30;
constexpr int64_t kMaxBatch = int64_t{1} << 40;

// Without its flag, the value the plan forwards as an override (a Hydra `null` = no value).
ProbeResult<std::optional<int64_t>> override_default(const Options& options, std::string_view key,
                                                     int64_t max) {
  const auto text = override_value(options.runtime_overrides, key);
  if (!text || *text == "null") return std::optional<int64_t>();
  auto value = int_flag(key, *text, 1, max);
  if (!value.ok()) return value.status();
  return std::optional<int64_t>(*value);
}

// What the loop over argv found besides the options themselves.
struct FlagsSeen {
  std::optional<bool> overlap;  // --overlap / --no-overlap.
  bool steps = false;           // --steps.
  bool global_batch = false;    // --global-batch.
};

// The launcher forwards the plan's step count and global batch as overrides; an explicit flag
// still wins (the plan check then reports a difference from the plan).
ProbeStatus apply_override_defaults(Options& options, const FlagsSeen& seen) {
  if (seen.steps) {
    options.steps_source = "--steps";
  } else {
    const auto steps = override_default(options, "train.max_steps", kMaxInt);
    if (!steps.ok()) return steps.status();
    if (*steps) {
      options.steps = static_cast<int>(**steps);
      options.steps_source = "train.max_steps";
    }
  }
  if (seen.global_batch) {
    options.global_batch_source = "--global-batch";
  } else {
    const auto batch = override_default(options, "train.global_batch_size", kMaxBatch);
    if (!batch.ok()) return batch.status();
    if (*batch) {
      options.global_batch = **batch;
      options.global_batch_source = "train.global_batch_size";
    }
  }
  return {};
}

std::optional<bool> parse_bool(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (text == "1" || text == "true" || text == "yes" || text == "on") return true;
  if (text == "0" || text == "false" || text == "no" || text == "off") return false;
  return std::nullopt;
}

// Flags that take no value.
bool is_switch(std::string_view name) {
  return name == "-h" || name == "--help" || name == "--overlap" || name == "--no-overlap";
}

void apply_switch(std::string_view name, Options& options, FlagsSeen& seen) {
  if (name == "--overlap" || name == "--no-overlap") {
    seen.overlap = name == "--overlap";
  } else {
    options.help = true;
  }
}

// The flags with an integer value: name, accepted range, and where the value goes.
struct IntFlagSpec {
  std::string_view name;
  int64_t min;
  int64_t max;
  void (*set)(Options&, FlagsSeen&, int64_t);
};

constexpr IntFlagSpec kIntFlags[] = {
    {"--steps", 1, kMaxInt,
     [](Options& o, FlagsSeen& seen, int64_t v) {
       o.steps = static_cast<int>(v);
       seen.steps = true;
     }},
    {"--buckets", 1, 1 << 20,
     [](Options& o, FlagsSeen&, int64_t v) {
       o.buckets = static_cast<int>(v);
       o.buckets_flag = true;
     }},
    {"--microbatches", 1, 1024,
     [](Options& o, FlagsSeen&, int64_t v) { o.microbatches = static_cast<int>(v); }},
    {"--layers", 1, 1024,
     [](Options& o, FlagsSeen&, int64_t v) { o.layers = static_cast<int>(v); }},
    {"--tokens", 1, 1 << 16,
     [](Options& o, FlagsSeen&, int64_t v) { o.tokens = static_cast<int>(v); }},
    {"--hidden", 1, 1 << 16,
     [](Options& o, FlagsSeen&, int64_t v) { o.hidden = static_cast<int>(v); }},
    {"--params", 1, int64_t{1} << 32, [](Options& o, FlagsSeen&, int64_t v) { o.params = v; }},
    {"--global-batch", 1, kMaxBatch,
     [](Options& o, FlagsSeen& seen, int64_t v) {
       o.global_batch = v;
       seen.global_batch = true;
     }},
    {"--fail-rank", 0, kMaxInt,
     [](Options& o, FlagsSeen&, int64_t v) { o.fail_rank = static_cast<int>(v); }},
    {"--fail-at-step", 1, kMaxInt,
     [](Options& o, FlagsSeen&, int64_t v) { o.fail_at_step = static_cast<int>(v); }},
    {"--hang-rank", 0, kMaxInt,
     [](Options& o, FlagsSeen&, int64_t v) { o.hang_rank = static_cast<int>(v); }},
    {"--hang-at-step", 1, kMaxInt,
     [](Options& o, FlagsSeen&, int64_t v) { o.hang_at_step = static_cast<int>(v); }},
    {"--hang-at-exit-rank", 0, kMaxInt,
     [](Options& o, FlagsSeen&, int64_t v) { o.hang_at_exit_rank = static_cast<int>(v); }},
    {"--corrupt-rank", 0, kMaxInt,
     [](Options& o, FlagsSeen&, int64_t v) { o.corrupt_rank = static_cast<int>(v); }},
    {"--corrupt-at-step", 1, kMaxInt,
     [](Options& o, FlagsSeen&, int64_t v) { o.corrupt_at_step = static_cast<int>(v); }},
};

// The flags with a number value.
struct DoubleFlagSpec {
  std::string_view name;
  double min;
  double max;
  double Options::*target;
};

constexpr DoubleFlagSpec kDoubleFlags[] = {
    {"--layer-ms", 0.0, 1e6, &Options::layer_ms},
    {"--compute-ms", 0.0, 1e7, &Options::compute_ms},
    {"--link-gbps", 0.0, 1e6, &Options::link_gbps},
    {"--timeout", 0.001, 1e6, &Options::timeout_s},
};

// The flags with a text value: checks it and stores it.
ProbeStatus apply_text_flag(std::string_view name, std::string_view text, Options& options) {
  const std::string name_str(name);
  if (name == "--corrupt-in") {
    if (text != "dp" && text != "ep" && text != "tp" && text != "pp") {
      return ProbeStatus(kExitUsage,
                         name_str + ": expected dp, ep, tp or pp, got '" + std::string(text) + "'");
    }
    options.corrupt_in = std::string(text);
  } else if (name == "--expect-file") {
    if (text.empty() || text.front() == '=')
      return ProbeStatus(kExitUsage, name_str + ": expected PATH or PATH=TEXT");
    options.expect_files.emplace_back(text);
  } else {  // --dump-env-dir
    options.dump_env_dir = std::string(text);
    if (options.dump_env_dir.empty()) return ProbeStatus(kExitUsage, name_str + ": empty path");
  }
  return {};
}

// One flag that takes a value; `value()` yields it (from `--flag=VALUE` or the next argument)
// and is called only for a known flag. Returns false when `name` is no such flag.
template <typename ValueFn>
ProbeResult<bool> apply_value_flag(std::string_view name, const ValueFn& value, Options& options,
                                   FlagsSeen& seen) {
  for (const IntFlagSpec& flag : kIntFlags) {
    if (name != flag.name) continue;
    const ProbeResult<std::string_view> text = value();
    if (!text.ok()) return text.status();
    const auto parsed = int_flag(name, *text, flag.min, flag.max);
    if (!parsed.ok()) return parsed.status();
    flag.set(options, seen, *parsed);
    return true;
  }
  for (const DoubleFlagSpec& flag : kDoubleFlags) {
    if (name != flag.name) continue;
    const ProbeResult<std::string_view> text = value();
    if (!text.ok()) return text.status();
    const auto parsed = double_flag(name, *text, flag.min, flag.max);
    if (!parsed.ok()) return parsed.status();
    options.*flag.target = *parsed;
    if (name == "--link-gbps" && options.link_gbps > 0.0 && options.link_gbps < 1e-6) {
      return ProbeStatus(kExitUsage,
                         std::string(name) + ": below 1e-6 Gbit/s (use 0 for unlimited)");
    }
    return true;
  }
  if (name != "--corrupt-in" && name != "--dump-env-dir" && name != "--expect-file") return false;
  const ProbeResult<std::string_view> text = value();
  if (!text.ok()) return text.status();
  if (ProbeStatus status = apply_text_flag(name, *text, options); !status.ok()) return status;
  return true;
}

// The overlap switch: --overlap / --no-overlap, else BRIDGE_OVERLAP_GRAD_REDUCE, else the
// resolved field among the overrides, else off.
ProbeStatus resolve_overlap(Options& options, const FlagsSeen& seen) {
  if (seen.overlap) {
    options.overlap = *seen.overlap;
    options.overlap_source = *seen.overlap ? "--overlap" : "--no-overlap";
  } else if (const auto env = env_var("BRIDGE_OVERLAP_GRAD_REDUCE")) {
    const auto parsed = parse_bool(*env);
    if (!parsed) {
      return ProbeStatus(kExitUsage, "BRIDGE_OVERLAP_GRAD_REDUCE='" + *env +
                                         "' is not a boolean (expected 1 or 0)");
    }
    options.overlap = *parsed;
    options.overlap_source = "BRIDGE_OVERLAP_GRAD_REDUCE=" + *env;
  } else {
    // The resolved field itself, for a probe started with the plan's overrides but without
    // the launcher's env.
    for (const char* key : {"comm_overlap.overlap_grad_reduce", "ddp.overlap_grad_reduce"}) {
      const auto text = override_value(options.runtime_overrides, key);
      const auto parsed = text ? parse_bool(*text) : std::nullopt;
      if (!parsed) continue;
      options.overlap = *parsed;
      options.overlap_source = std::string(key) + "=" + *text;
      break;
    }
  }
  return {};
}

ProbeStatus check_fault_steps(const Options& options) {
  for (const auto& [step, what] : {std::pair{options.fail_at_step, "--fail-at-step"},
                                   std::pair{options.hang_at_step, "--hang-at-step"},
                                   std::pair{options.corrupt_at_step, "--corrupt-at-step"}}) {
    if (step > options.steps) {
      return ProbeStatus(kExitUsage, str_printf("%s %d is after the last step (--steps %d)", what,
                                                step, options.steps));
    }
  }
  return {};
}

// RANK and WORLD_SIZE (or their Slurm fallbacks): required.
ProbeStatus read_rank_and_world(Identity& id) {
  const auto rank_env = first_int_env({"RANK", "SLURM_PROCID"});
  if (!rank_env.ok()) return rank_env.status();
  const auto world_env = first_int_env({"WORLD_SIZE", "SLURM_NTASKS"});
  if (!world_env.ok()) return world_env.status();
  const std::optional<EnvInt>& rank = *rank_env;
  const std::optional<EnvInt>& world = *world_env;
  if (!rank || !world) {
    std::string missing;
    if (!rank) missing += "RANK (or SLURM_PROCID)";
    if (!world)
      missing += std::string(missing.empty() ? "" : " and ") + "WORLD_SIZE (or SLURM_NTASKS)";
    return ProbeStatus(kExitUsage,
                       "no rank identity: " + missing +
                           " not set; run under a launcher (bridge-launch, torchrun, srun)");
  }
  if (world->value < 1 || world->value > 65536) {
    return ProbeStatus(kExitUsage, str_printf("%s=%lld is out of range [1, 65536]", world->name,
                                              static_cast<long long>(world->value)));
  }
  if (rank->value < 0 || rank->value >= world->value) {
    return ProbeStatus(kExitUsage, str_printf("%s=%lld is out of range for %s=%lld", rank->name,
                                              static_cast<long long>(rank->value), world->name,
                                              static_cast<long long>(world->value)));
  }
  id.rank = static_cast<int>(rank->value);
  id.world_size = static_cast<int>(world->value);
  id.rank_source = std::string(rank->name) + "/" + world->name;
  id.world_size_source = world->name;
  return {};
}

// LOCAL_RANK, LOCAL_WORLD_SIZE and NODE_RANK (or their fallbacks): optional.
ProbeStatus read_local_identity(Identity& id) {
  const auto local_rank = first_int_env({"LOCAL_RANK", "SLURM_LOCALID"});
  if (!local_rank.ok()) return local_rank.status();
  const auto local_world = first_int_env({"LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"});
  if (!local_world.ok()) return local_world.status();
  const auto node_rank = first_int_env({"NODE_RANK", "SLURM_NODEID", "GROUP_RANK"});
  if (!node_rank.ok()) return node_rank.status();
  id.local_rank = *local_rank ? static_cast<int>((*local_rank)->value) : id.rank;
  id.local_world_size = *local_world ? static_cast<int>((*local_world)->value) : id.world_size;
  id.node_rank = *node_rank ? static_cast<int>((*node_rank)->value) : 0;
  if (id.local_rank < 0 || id.local_world_size < 1 || id.local_rank >= id.local_world_size) {
    return ProbeStatus(kExitUsage,
                       str_printf("local rank %d is out of range for local world size %d "
                                  "(LOCAL_RANK/SLURM_LOCALID, LOCAL_WORLD_SIZE)",
                                  id.local_rank, id.local_world_size));
  }
  if (id.node_rank < 0) {
    return ProbeStatus(kExitUsage,
                       str_printf("%s=%d is negative", (*node_rank)->name, id.node_rank));
  }
  return {};
}

// MASTER_ADDR, MASTER_PORT and the port rank 0 listens on.
ProbeStatus read_rendezvous_address(Identity& id) {
  const auto addr = env_var("MASTER_ADDR");
  const auto port_text = env_var("MASTER_PORT");
  if (id.world_size > 1 && (!addr || !port_text)) {
    return ProbeStatus(
        kExitUsage,
        str_printf("WORLD_SIZE=%d needs a rendezvous address: %s not set", id.world_size,
                   !addr && !port_text ? "MASTER_ADDR and MASTER_PORT"
                   : !addr             ? "MASTER_ADDR"
                                       : "MASTER_PORT"));
  }
  if (addr) id.master_addr = *addr;
  if (port_text) {
    const auto port = parse_int64(*port_text);
    if (!port || *port < 1 || *port > 65535) {
      return ProbeStatus(kExitUsage,
                         "MASTER_PORT='" + *port_text + "' is not a TCP port (1-65535)");
    }
    id.master_port = static_cast<int>(*port);
  }
  id.rendezvous_port = id.master_port;
  id.rendezvous_port_source = "MASTER_PORT";
  if (const auto probe_port = env_var("BRIDGE_PROBE_PORT")) {
    const auto port = parse_int64(*probe_port);
    if (!port || *port < 1 || *port > 65535) {
      return ProbeStatus(kExitUsage,
                         "BRIDGE_PROBE_PORT='" + *probe_port + "' is not a TCP port (1-65535)");
    }
    id.rendezvous_port = static_cast<int>(*port);
    id.rendezvous_port_source = "BRIDGE_PROBE_PORT";
  } else if (env_var("TORCHELASTIC_USE_AGENT_STORE") == "True" && id.master_port > 0) {
    // Under torchrun the agent's TCPStore already listens on MASTER_PORT.
    id.rendezvous_port = id.master_port < 65535 ? id.master_port + 1 : id.master_port - 1;
    id.rendezvous_port_source = "MASTER_PORT+1 (torchrun's store holds MASTER_PORT)";
  }
  return {};
}
}  // namespace

std::string usage() {
  return R"(usage: bridge-probe [flags]

Distributed overlap probe: rendezvous over TCP, env check, then a training-like loop that
emulates the overlaps of the plan: EP all-to-all, TP all-gather/reduce-scatter, PP send/recv,
DP param all-gather and bucketed gradient all-reduce, each with or without overlap.
Identity comes from RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, MASTER_ADDR,
MASTER_PORT (or SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODEID). Rank 0 listens
on MASTER_PORT, or on BRIDGE_PROBE_PORT when set, or on MASTER_PORT+1 under torchrun
(TORCHELASTIC_USE_AGENT_STORE=True: torchrun's own store already holds MASTER_PORT).

flags:
  --steps N              training steps
                         (default: the override train.max_steps=N, else 8)
  --buckets K            gradient buckets per step (default: params/bucket_size from
                         the override comm_overlap.bucket_size, else 8)
  --params P             float gradient values per rank (default 1048576)
  --compute-ms X         single-core compute time of one backward pass, ms (default 200)
  --link-gbps G          emulated link bandwidth in Gbit/s, 0 = unlimited (default 0)
  --overlap              all-reduce bucket b while bucket b+1 is computed
  --no-overlap           all-reduce only after the whole compute phase
                         (default: BRIDGE_OVERLAP_GRAD_REDUCE=1/0, else the override
                         comm_overlap.overlap_grad_reduce, else no overlap)
  --microbatches N       micro-batches per step in the TP/PP/EP phases
                         (default: global batch / (micro batch * dp) from the plan, an
                         unset micro batch being 1; else 1)
  --layers L             layers per pipeline stage in the TP/PP/EP phases
                         (default: model.num_layers / pp, at most 8, else 2)
  --layer-ms X           emulated device time of one layer's forward for one
                         micro-batch, ms; backward = 2X (default 2)
  --tokens T             tokens per micro-batch on each rank (default 64)
  --hidden H             floats per token (default 256)
  --global-batch B       samples per step for "consumed samples"
                         (default: the override train.global_batch_size=B, else 1)
  --timeout SEC          rendezvous and per-peer communication timeout (default 60)
  --dump-env-dir DIR     write the raw value of every BRIDGE_EXPECTED_ENV variable to
                         DIR/rank<R>.<NAME>
  --expect-file PATH[=TEXT]  every rank checks that PATH exists (relative: below
                         $BRIDGE_CODE_DIR, the shipped source tree) and holds TEXT;
                         repeatable; a failed check exits 1
  --fail-rank R          fault injection: rank R exits with code 17 ...
  --fail-at-step S       ... at the start of step S (default 1)
  --hang-rank R          fault injection: rank R sleeps forever instead of all-reducing ...
  --hang-at-step S       ... in step S (default 1)
  --hang-at-exit-rank R  fault injection: rank R sleeps after training instead of exiting
  --corrupt-rank R       fault injection: rank R contributes a wrong value ...
  --corrupt-at-step S    ... in step S (default 1)
  --corrupt-in PHASE     ... in the dp all-reduce (default), or the ep all-to-all, the tp
                         all-gather or the pp send
  -h, --help             this text

environment:
  BRIDGE_EXPECTED_ENV    inline list or @FILE; entries separated by ';' or newlines:
                         NAME=HEX (HEX = 16-digit lowercase FNV-1a 64 of the exact value)
                         or NAME? (must be set, value not compared)
  BRIDGE_EXPECTED_PLAN   key=value pairs separated by ';': each key's last override in
                         argv must equal the value; cluster.num_gpus must equal the world
                         size, and tp*pp*cp must divide it
  BRIDGE_OVERLAP_GRAD_REDUCE  1/0: default for --overlap/--no-overlap

The layout (tp, pp, vpp, cp, ep, etp, sequence_parallel) and the comm_overlap.* fields come
from the key=value overrides the launcher's probe adapter forwards; see docs/probe.md.
  BRIDGE_PROBE_PORT      rendezvous port to use instead of MASTER_PORT

exit codes: 0 ok, 1 local I/O error, 2 usage/identity/layout, 3 env/plan mismatch, 4 wrong
collective result, 5 rendezvous/timeout/lost peer, 17 injected failure
)";
}

std::optional<std::string> override_value(const std::vector<std::string>& overrides,
                                          std::string_view key) {
  std::optional<std::string> value;
  for (const std::string& arg : overrides) {
    const std::string_view text = arg;
    const size_t eq = text.find('=');
    std::string_view name = text.substr(0, eq);
    // Hydra's `+key=v` / `++key=v` (add / force-add) set the same key.
    for (int i = 0; i < 2 && !name.empty() && name.front() == '+'; ++i) name.remove_prefix(1);
    if (name == key) value = std::string(text.substr(eq + 1));  // Later occurrences win.
  }
  return value;
}

ProbeResult<Options> parse_options(int argc, char** argv) {
  Options options;
  FlagsSeen seen;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    // Hydra-style `section.key=value` runtime overrides (bridge-launch forwards the resolved
    // plan and overlap fields this way) are recorded: the probe has no model to configure, but
    // the plan check compares them and train.max_steps / train.global_batch_size give defaults.
    if (arg.rfind('-', 0) != 0 && arg.find('=') != std::string_view::npos) {
      options.runtime_overrides.emplace_back(arg);
      continue;
    }
    std::string_view name = arg;
    std::optional<std::string_view> inline_value;
    if (arg.rfind("--", 0) == 0) {
      const size_t eq = arg.find('=');
      if (eq != std::string_view::npos) {
        name = arg.substr(0, eq);
        inline_value = arg.substr(eq + 1);
      }
    }
    if (is_switch(name)) {
      if (inline_value) return ProbeStatus(kExitUsage, std::string(name) + ": takes no value");
      apply_switch(name, options, seen);
      continue;
    }
    const auto value = [&]() -> ProbeResult<std::string_view> {
      if (inline_value) return *inline_value;
      if (i + 1 >= argc) return ProbeStatus(kExitUsage, std::string(name) + ": missing value");
      return std::string_view(argv[++i]);
    };
    const ProbeResult<bool> known = apply_value_flag(name, value, options, seen);
    if (!known.ok()) return known.status();
    if (!*known) {
      return ProbeStatus(kExitUsage, "unknown flag '" + std::string(arg) + "' (see --help)");
    }
  }
  if (ProbeStatus status = apply_override_defaults(options, seen); !status.ok()) return status;
  if (ProbeStatus status = resolve_overlap(options, seen); !status.ok()) return status;
  if (ProbeStatus status = check_fault_steps(options); !status.ok()) return status;
  return options;
}

ProbeResult<Identity> read_identity() {
  Identity id;
  if (ProbeStatus status = read_rank_and_world(id); !status.ok()) return status;
  if (ProbeStatus status = read_local_identity(id); !status.ok()) return status;
  if (ProbeStatus status = read_rendezvous_address(id); !status.ok()) return status;
  return id;
}

ProbeStatus validate_options_for_world(const Options& options, const Identity& identity) {
  for (const auto& [rank, what] :
       {std::pair{options.fail_rank, "--fail-rank"}, std::pair{options.hang_rank, "--hang-rank"},
        std::pair{options.hang_at_exit_rank, "--hang-at-exit-rank"},
        std::pair{options.corrupt_rank, "--corrupt-rank"}}) {
    if (rank >= identity.world_size) {
      return ProbeStatus(kExitUsage, str_printf("%s %d is outside the world (WORLD_SIZE=%d)", what,
                                                rank, identity.world_size));
    }
  }
  return {};
}

}  // namespace bridge::probe
