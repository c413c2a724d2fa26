// Command-line flags and rank identity of bridge-probe.
//
// Contract: parse_options() hand-parses argv (`--flag VALUE` or `--flag=VALUE`) and resolves the
// overlap switch (--overlap / --no-overlap beat BRIDGE_OVERLAP_GRAD_REDUCE, which beats the
// default "off"). read_identity() reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK,
// MASTER_ADDR and MASTER_PORT, falling back to SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
// SLURM_NTASKS_PER_NODE and SLURM_NODEID. RANK and WORLD_SIZE (or their Slurm fallbacks) are
// required; MASTER_ADDR/MASTER_PORT are required when WORLD_SIZE > 1. The probe's rendezvous
// port is MASTER_PORT, overridden by BRIDGE_PROBE_PORT, or MASTER_PORT+1 when
// TORCHELASTIC_USE_AGENT_STORE=True (torchrun's TCPStore already listens on MASTER_PORT). Both
// functions return a kExitUsage failure with a message naming the offending flag or variable.
//
// Arguments that do not start with '-' and contain '=' are Hydra-style overrides `key=value`
// (kept in order in runtime_overrides; leading '+' / '++' are not part of the key).
// override_value() returns the value of the last occurrence of a key, as Hydra resolves repeats.
// Without --steps / --global-batch, the step count / global batch default to the overrides
// train.max_steps / train.global_batch_size (a Hydra `null` counts as absent), so a recipe need
// not repeat the plan; the *_source fields say where each value came from.
// validate_options_for_world() checks the fault-injection ranks against the world size (a
// kExitUsage failure when one is outside it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "probe/probe_error.h"

namespace bridge::probe {

struct Options {
  int steps = 8;
  std::string steps_source = "default";  // "--steps", "train.max_steps" or "default".
  int buckets = 8;
  bool buckets_flag = false;  // --buckets given; else comm_overlap.bucket_size decides.
  int64_t params = int64_t{1} << 20;
  double compute_ms = 200.0;
  double link_gbps = 0.0;  // 0 = unlimited (no emulated wire).
  // Sizes of the emulated TP/PP/EP phases (docs/probe.md, "Emulated phases").
  std::optional<int> microbatches;  // Else global batch / (micro batch * dp).
  std::optional<int> layers;        // Layers per pipeline stage; else num_layers / pp, max 8.
  double layer_ms = 2.0;            // Device time of one layer's forward for one micro-batch.
  int tokens = 64;                  // Tokens per micro-batch on each rank.
  int hidden = 256;                 // Floats per token.
  std::string corrupt_in = "dp";    // Phase --corrupt-rank corrupts: dp, ep, tp, pp.
  bool overlap = false;
  std::vector<std::string> runtime_overrides;  // `key=value` args, in argv order.
  std::string overlap_source = "default";      // Where `overlap` came from, for the banner.
  int64_t global_batch = 1;
  std::string global_batch_source = "default";  // "--global-batch", "train.global_batch_size"...
  double timeout_s = 60.0;
  std::string dump_env_dir;
  // --expect-file PATH[=TEXT]: every rank checks that PATH exists (a relative PATH is taken
  // from $BRIDGE_CODE_DIR, the source tree the launcher shipped, else the working directory)
  // and, with =TEXT, that its content is TEXT (one trailing newline ignored). Repeatable.
  std::vector<std::string> expect_files;
  int fail_rank = -1;
  int fail_at_step = 1;
  int hang_rank = -1;
  int hang_at_step = 1;
  int hang_at_exit_rank = -1;
  int corrupt_rank = -1;
  int corrupt_at_step = 1;
  bool help = false;
};

struct Identity {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  std::string master_addr;
  int master_port = 0;
  int rendezvous_port = 0;             // The port rank 0 listens on (see read_identity).
  std::string rendezvous_port_source;  // "MASTER_PORT", "BRIDGE_PROBE_PORT", ...
  std::string rank_source;             // e.g. "RANK/WORLD_SIZE" or "SLURM_PROCID/SLURM_NTASKS".
  std::string world_size_source;       // The variable world_size came from, e.g. "WORLD_SIZE".
};

// A whole decimal integer (optional '-'), nullopt otherwise; the probe's one number parser.
std::optional<int64_t> parse_int64(std::string_view text);

ProbeResult<Options> parse_options(int argc, char** argv);
// The value of the last `key=value` override for `key`, if any.
std::optional<std::string> override_value(const std::vector<std::string>& overrides,
                                          std::string_view key);
ProbeResult<Identity> read_identity();
ProbeStatus validate_options_for_world(const Options& options, const Identity& identity);
std::string usage();

}  // namespace bridge::probe
