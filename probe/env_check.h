// Env check of bridge-probe: did every rank receive the environment the launcher planned?
//
// Contract: BRIDGE_EXPECTED_ENV is either an inline list or `@/path/to/file` (the list is the
// file's content). Entries are separated by ';' or newlines; surrounding spaces, tabs and CRs,
// empty entries and entries starting with '#' are ignored. Each entry is either
//   NAME=HEX  HEX = bridge::fnv1a64_hex(value): FNV-1a 64 of the exact value bytes, 16 lowercase
//             hex digits; the variable must be set to exactly that value, or
//   NAME?     the variable must be set (any value; used for secrets).
// NAME matches [A-Za-z_][A-Za-z0-9_]* and appears once. A malformed list is a kExitUsage
// failure (probe_error.h), and so is a `@file` that cannot be read. Per rank each variable is ok,
// mismatch (set, other hash) or missing (unset). run_env_check() is collective over the control
// connections: rank 0 gathers every rank's states, prints the summary table
//   env check: N variables, W ranks
//     NAME  ranks ok: k/W  differ: rank 1 (mismatch), rank 3 (missing)
//   env check: all ranks match | env check: MISMATCH
// (or `env check: skipped (BRIDGE_EXPECTED_ENV not set)` when no rank has the variable), and
// broadcasts the verdict, so every rank returns the same value. A rank whose list differs from
// rank 0's counts as differing on every variable. Rank 0 then prints device_connections_line():
// the value of CUDA_DEVICE_MAX_CONNECTIONS and that a CPU emulation cannot show its effect (the
// launcher derives it; the probe only reports it). dump_env() writes the raw bytes of each listed
// variable that is set to DIR/rank<R>.<NAME> (DIR is created if missing; a kExitInternal failure
// when that or a write fails). A communication failure during the check is returned as well.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "probe/probe_error.h"
#include "probe/transport.h"

namespace bridge::probe {

struct ExpectedVar {
  std::string name;
  bool compare_value = true;  // false for `NAME?`.
  std::string hash;           // 16 lowercase hex digits when compare_value.
};

struct ExpectedEnv {
  bool present = false;  // BRIDGE_EXPECTED_ENV set (and non-empty).
  std::vector<ExpectedVar> vars;
};

// Parses a list in the format above (the text after resolving `@file`).
ProbeResult<ExpectedEnv> parse_expected_env(std::string_view list);

// Reads BRIDGE_EXPECTED_ENV (and the file it points to).
ProbeResult<ExpectedEnv> load_expected_env();

ProbeStatus dump_env(const ExpectedEnv& expected, const std::string& dir, int rank);

// `env check: CUDA_DEVICE_MAX_CONNECTIONS is '<value>'|unset on rank 0 ...` (value may be null).
std::string device_connections_line(const char* value);

// Returns true when every rank matches (or the check is skipped).
ProbeResult<bool> run_env_check(const ExpectedEnv& expected, Cluster& cluster);

}  // namespace bridge::probe
