#include "runtime/options.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string_view>

#include "runtime/probe_error.h"

namespace bridge::probe {

std::optional<int64_t> ParseInt64(std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto result = std::from_chars(text.data(), end, value);
  if (text.empty() || result.ec != std::errc() || result.ptr != end) return std::nullopt;
  return value;
}

namespace {

std::optional<double> ToDouble(std::string_view text) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto result = std::from_chars(text.data(), end, value);
  if (text.empty() || result.ec != std::errc() || result.ptr != end || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

int64_t IntFlag(std::string_view name, std::string_view text, int64_t min, int64_t max) {
  const auto value = ParseInt64(text);
  if (!value || *value < min || *value > max) {
    throw ProbeError(kExitUsage, StrPrintf("%.*s: expected an integer in [%lld, %lld], got '%.*s'",
                                           static_cast<int>(name.size()), name.data(),
                                           static_cast<long long>(min), static_cast<long long>(max),
                                           static_cast<int>(text.size()), text.data()));
  }
  return *value;
}

double DoubleFlag(std::string_view name, std::string_view text, double min, double max) {
  const auto value = ToDouble(text);
  if (!value || *value < min || *value > max) {
    throw ProbeError(kExitUsage, StrPrintf("%.*s: expected a number in [%g, %g], got '%.*s'",
                                           static_cast<int>(name.size()), name.data(), min, max,
                                           static_cast<int>(text.size()), text.data()));
  }
  return *value;
}

// Returns the variable's value, treating an empty value as unset.
std::optional<std::string> Env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

struct EnvInt {
  int64_t value;
  const char* name;
};

// The first of `names` that is set, parsed as an integer.
std::optional<EnvInt> FirstIntEnv(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const auto text = Env(name);
    if (!text) continue;
    const auto value = ParseInt64(*text);
    if (!value) {
      throw ProbeError(kExitUsage, StrPrintf("%s='%s' is not an integer", name, text->c_str()));
    }
    return EnvInt{*value, name};
  }
  return std::nullopt;
}

constexpr int64_t kMaxInt = 1 << 30;
constexpr int64_t kMaxBatch = int64_t{1} << 40;

// Without its flag, the value the plan forwards as an override (a Hydra `null` = no value).
std::optional<int64_t> OverrideDefault(const Options& options, std::string_view key, int64_t max) {
  const auto text = OverrideValue(options.runtime_overrides, key);
  if (!text || *text == "null") return std::nullopt;
  return IntFlag(key, *text, 1, max);
}

// The launcher forwards the plan's step count and global batch as overrides; an explicit flag
// still wins (the plan check then reports a difference from the plan).
void ApplyOverrideDefaults(Options& options, bool steps_flag, bool global_batch_flag) {
  if (steps_flag) {
    options.steps_source = "--steps";
  } else if (const auto steps = OverrideDefault(options, "train.max_steps", kMaxInt)) {
    options.steps = static_cast<int>(*steps);
    options.steps_source = "train.max_steps";
  }
  if (global_batch_flag) {
    options.global_batch_source = "--global-batch";
  } else if (const auto batch = OverrideDefault(options, "train.global_batch_size", kMaxBatch)) {
    options.global_batch = *batch;
    options.global_batch_source = "train.global_batch_size";
  }
}

std::optional<bool> ParseBool(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (text == "1" || text == "true" || text == "yes" || text == "on") return true;
  if (text == "0" || text == "false" || text == "no" || text == "off") return false;
  return std::nullopt;
}

}  // namespace

std::string Usage() {
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
                         (default: global batch / (micro batch * dp) from the plan, else 1)
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
  --fail-rank R          fault injection: rank R exits with code 17 ...
  --fail-at-step S       ... at the start of step S (default 1)
  --hang-rank R          fault injection: rank R sleeps forever instead of all-reducing ...
  --hang-at-step S       ... in step S (default 1)
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

std::optional<std::string> OverrideValue(const std::vector<std::string>& overrides,
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

Options ParseOptions(int argc, char** argv) {
  Options options;
  std::optional<bool> overlap_flag;
  bool steps_flag = false;
  bool global_batch_flag = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    std::string_view name = arg;
    std::optional<std::string_view> inline_value;
    if (arg.rfind("--", 0) == 0) {
      const size_t eq = arg.find('=');
      if (eq != std::string_view::npos) {
        name = arg.substr(0, eq);
        inline_value = arg.substr(eq + 1);
      }
    }
    // Hydra-style `section.key=value` runtime overrides (bridge-launch forwards the resolved
    // plan and overlap fields this way) are recorded: the probe has no model to configure, but
    // the plan check compares them and train.max_steps / train.global_batch_size give defaults.
    if (arg.rfind('-', 0) != 0 && arg.find('=') != std::string_view::npos) {
      options.runtime_overrides.emplace_back(arg);
      continue;
    }
    const std::string name_str(name);
    auto value = [&]() -> std::string_view {
      if (inline_value) return *inline_value;
      if (i + 1 >= argc) throw ProbeError(kExitUsage, name_str + ": missing value");
      return argv[++i];
    };
    auto no_value = [&]() {
      if (inline_value) throw ProbeError(kExitUsage, name_str + ": takes no value");
    };
    if (name == "-h" || name == "--help") {
      no_value();
      options.help = true;
    } else if (name == "--overlap") {
      no_value();
      overlap_flag = true;
    } else if (name == "--no-overlap") {
      no_value();
      overlap_flag = false;
    } else if (name == "--steps") {
      options.steps = static_cast<int>(IntFlag(name, value(), 1, kMaxInt));
      steps_flag = true;
    } else if (name == "--buckets") {
      options.buckets = static_cast<int>(IntFlag(name, value(), 1, 1 << 20));
      options.buckets_flag = true;
    } else if (name == "--microbatches") {
      options.microbatches = static_cast<int>(IntFlag(name, value(), 1, 1024));
    } else if (name == "--layers") {
      options.layers = static_cast<int>(IntFlag(name, value(), 1, 1024));
    } else if (name == "--layer-ms") {
      options.layer_ms = DoubleFlag(name, value(), 0.0, 1e6);
    } else if (name == "--tokens") {
      options.tokens = static_cast<int>(IntFlag(name, value(), 1, 1 << 16));
    } else if (name == "--hidden") {
      options.hidden = static_cast<int>(IntFlag(name, value(), 1, 1 << 16));
    } else if (name == "--corrupt-in") {
      const std::string_view phase = value();
      if (phase != "dp" && phase != "ep" && phase != "tp" && phase != "pp") {
        throw ProbeError(
            kExitUsage, name_str + ": expected dp, ep, tp or pp, got '" + std::string(phase) + "'");
      }
      options.corrupt_in = std::string(phase);
    } else if (name == "--params") {
      options.params = IntFlag(name, value(), 1, int64_t{1} << 32);
    } else if (name == "--compute-ms") {
      options.compute_ms = DoubleFlag(name, value(), 0.0, 1e7);
    } else if (name == "--link-gbps") {
      const std::string_view text = value();
      options.link_gbps = DoubleFlag(name, text, 0.0, 1e6);
      if (options.link_gbps > 0.0 && options.link_gbps < 1e-6) {
        throw ProbeError(kExitUsage, name_str + ": below 1e-6 Gbit/s (use 0 for unlimited)");
      }
    } else if (name == "--global-batch") {
      options.global_batch = IntFlag(name, value(), 1, kMaxBatch);
      global_batch_flag = true;
    } else if (name == "--timeout") {
      options.timeout_s = DoubleFlag(name, value(), 0.001, 1e6);
    } else if (name == "--dump-env-dir") {
      options.dump_env_dir = std::string(value());
      if (options.dump_env_dir.empty()) throw ProbeError(kExitUsage, name_str + ": empty path");
    } else if (name == "--fail-rank") {
      options.fail_rank = static_cast<int>(IntFlag(name, value(), 0, kMaxInt));
    } else if (name == "--fail-at-step") {
      options.fail_at_step = static_cast<int>(IntFlag(name, value(), 1, kMaxInt));
    } else if (name == "--hang-rank") {
      options.hang_rank = static_cast<int>(IntFlag(name, value(), 0, kMaxInt));
    } else if (name == "--hang-at-step") {
      options.hang_at_step = static_cast<int>(IntFlag(name, value(), 1, kMaxInt));
    } else if (name == "--corrupt-rank") {
      options.corrupt_rank = static_cast<int>(IntFlag(name, value(), 0, kMaxInt));
    } else if (name == "--corrupt-at-step") {
      options.corrupt_at_step = static_cast<int>(IntFlag(name, value(), 1, kMaxInt));
    } else {
      throw ProbeError(kExitUsage, "unknown flag '" + std::string(arg) + "' (see --help)");
    }
  }
  ApplyOverrideDefaults(options, steps_flag, global_batch_flag);
  if (overlap_flag) {
    options.overlap = *overlap_flag;
    options.overlap_source = *overlap_flag ? "--overlap" : "--no-overlap";
  } else if (const auto env = Env("BRIDGE_OVERLAP_GRAD_REDUCE")) {
    const auto parsed = ParseBool(*env);
    if (!parsed) {
      throw ProbeError(kExitUsage, "BRIDGE_OVERLAP_GRAD_REDUCE='" + *env +
                                       "' is not a boolean (expected 1 or 0)");
    }
    options.overlap = *parsed;
    options.overlap_source = "BRIDGE_OVERLAP_GRAD_REDUCE=" + *env;
  } else {
    // The resolved field itself, for a probe started with the plan's overrides but without
    // the launcher's env.
    for (const char* key : {"comm_overlap.overlap_grad_reduce", "ddp.overlap_grad_reduce"}) {
      const auto text = OverrideValue(options.runtime_overrides, key);
      const auto parsed = text ? ParseBool(*text) : std::nullopt;
      if (!parsed) continue;
      options.overlap = *parsed;
      options.overlap_source = std::string(key) + "=" + *text;
      break;
    }
  }
  for (const auto& [step, what] : {std::pair{options.fail_at_step, "--fail-at-step"},
                                   std::pair{options.hang_at_step, "--hang-at-step"},
                                   std::pair{options.corrupt_at_step, "--corrupt-at-step"}}) {
    if (step > options.steps) {
      throw ProbeError(kExitUsage, StrPrintf("%s %d is after the last step (--steps %d)", what,
                                             step, options.steps));
    }
  }
  return options;
}

Identity ReadIdentity() {
  Identity id;
  const auto rank = FirstIntEnv({"RANK", "SLURM_PROCID"});
  const auto world = FirstIntEnv({"WORLD_SIZE", "SLURM_NTASKS"});
  if (!rank || !world) {
    std::string missing;
    if (!rank) missing += "RANK (or SLURM_PROCID)";
    if (!world)
      missing += std::string(missing.empty() ? "" : " and ") + "WORLD_SIZE (or SLURM_NTASKS)";
    throw ProbeError(kExitUsage,
                     "no rank identity: " + missing +
                         " not set; run under a launcher (bridge-launch, torchrun, srun)");
  }
  if (world->value < 1 || world->value > 65536) {
    throw ProbeError(kExitUsage, StrPrintf("%s=%lld is out of range [1, 65536]", world->name,
                                           static_cast<long long>(world->value)));
  }
  if (rank->value < 0 || rank->value >= world->value) {
    throw ProbeError(kExitUsage, StrPrintf("%s=%lld is out of range for %s=%lld", rank->name,
                                           static_cast<long long>(rank->value), world->name,
                                           static_cast<long long>(world->value)));
  }
  id.rank = static_cast<int>(rank->value);
  id.world_size = static_cast<int>(world->value);
  id.rank_source = std::string(rank->name) + "/" + world->name;
  id.world_size_source = world->name;

  const auto local_rank = FirstIntEnv({"LOCAL_RANK", "SLURM_LOCALID"});
  const auto local_world = FirstIntEnv({"LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"});
  const auto node_rank = FirstIntEnv({"NODE_RANK", "SLURM_NODEID", "GROUP_RANK"});
  id.local_rank = local_rank ? static_cast<int>(local_rank->value) : id.rank;
  id.local_world_size = local_world ? static_cast<int>(local_world->value) : id.world_size;
  id.node_rank = node_rank ? static_cast<int>(node_rank->value) : 0;
  if (id.local_rank < 0 || id.local_world_size < 1 || id.local_rank >= id.local_world_size) {
    throw ProbeError(kExitUsage, StrPrintf("local rank %d is out of range for local world size %d "
                                           "(LOCAL_RANK/SLURM_LOCALID, LOCAL_WORLD_SIZE)",
                                           id.local_rank, id.local_world_size));
  }
  if (id.node_rank < 0) {
    throw ProbeError(kExitUsage, StrPrintf("%s=%d is negative", node_rank->name, id.node_rank));
  }

  const auto addr = Env("MASTER_ADDR");
  const auto port_text = Env("MASTER_PORT");
  if (id.world_size > 1 && (!addr || !port_text)) {
    throw ProbeError(
        kExitUsage, StrPrintf("WORLD_SIZE=%d needs a rendezvous address: %s not set", id.world_size,
                              !addr && !port_text ? "MASTER_ADDR and MASTER_PORT"
                              : !addr             ? "MASTER_ADDR"
                                                  : "MASTER_PORT"));
  }
  if (addr) id.master_addr = *addr;
  if (port_text) {
    const auto port = ParseInt64(*port_text);
    if (!port || *port < 1 || *port > 65535) {
      throw ProbeError(kExitUsage, "MASTER_PORT='" + *port_text + "' is not a TCP port (1-65535)");
    }
    id.master_port = static_cast<int>(*port);
  }
  id.rendezvous_port = id.master_port;
  id.rendezvous_port_source = "MASTER_PORT";
  if (const auto probe_port = Env("BRIDGE_PROBE_PORT")) {
    const auto port = ParseInt64(*probe_port);
    if (!port || *port < 1 || *port > 65535) {
      throw ProbeError(kExitUsage,
                       "BRIDGE_PROBE_PORT='" + *probe_port + "' is not a TCP port (1-65535)");
    }
    id.rendezvous_port = static_cast<int>(*port);
    id.rendezvous_port_source = "BRIDGE_PROBE_PORT";
  } else if (Env("TORCHELASTIC_USE_AGENT_STORE") == "True" && id.master_port > 0) {
    // Under torchrun the agent's TCPStore already listens on MASTER_PORT.
    id.rendezvous_port = id.master_port < 65535 ? id.master_port + 1 : id.master_port - 1;
    id.rendezvous_port_source = "MASTER_PORT+1 (torchrun's store holds MASTER_PORT)";
  }
  return id;
}

void ValidateOptionsForWorld(const Options& options, const Identity& identity) {
  for (const auto& [rank, what] :
       {std::pair{options.fail_rank, "--fail-rank"}, std::pair{options.hang_rank, "--hang-rank"},
        std::pair{options.corrupt_rank, "--corrupt-rank"}}) {
    if (rank >= identity.world_size) {
      throw ProbeError(kExitUsage, StrPrintf("%s %d is outside the world (WORLD_SIZE=%d)", what,
                                             rank, identity.world_size));
    }
  }
}

}  // namespace bridge::probe
