#include "probe/env_check.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "probe/env_hash.h"
#include "probe/probe_error.h"

namespace bridge::probe {
namespace {

enum class VarState : unsigned char { kOk = 0, kMismatch = 1, kMissing = 2 };

const char* state_name(VarState state) {
  switch (state) {
    case VarState::kOk:
      return "ok";
    case VarState::kMismatch:
      return "mismatch";
    case VarState::kMissing:
      return "missing";
  }
  return "?";
}

bool valid_name(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (const char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

bool valid_hash(std::string_view hash) {
  if (hash.size() != 16) return false;
  for (const char c : hash) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string_view trim(std::string_view text) {
  const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

// Canonical form of the list, so ranks can compare lists by hash.
std::string canonical(const ExpectedEnv& expected) {
  if (!expected.present) return "(unset)";
  std::string out;
  for (const ExpectedVar& var : expected.vars) {
    out += var.name + (var.compare_value ? "=" + var.hash : "?") + "\n";
  }
  return out;
}

std::vector<VarState> evaluate(const ExpectedEnv& expected) {
  std::vector<VarState> states;
  for (const ExpectedVar& var : expected.vars) {
    const char* value = std::getenv(var.name.c_str());
    if (value == nullptr) {
      states.push_back(VarState::kMissing);
    } else if (var.compare_value && fnv1a64_hex(value) != var.hash) {
      states.push_back(VarState::kMismatch);
    } else {
      states.push_back(VarState::kOk);
    }
  }
  return states;
}

struct RankReport {
  bool present = false;
  uint64_t list_hash = 0;
  std::vector<VarState> states;
};

std::string encode_report(const ExpectedEnv& expected, const std::vector<VarState>& states) {
  WireWriter w;
  w.u32(expected.present ? 1 : 0);
  w.u64(fnv1a64(canonical(expected)));
  std::string bytes;
  for (const VarState s : states) bytes.push_back(static_cast<char>(s));
  w.bytes(bytes);
  return w.data();
}

ProbeResult<RankReport> decode_report(const std::string& data) {
  WireReader r(data);
  RankReport report;
  report.present = r.u32() != 0;
  report.list_hash = r.u64();
  for (const char c : r.bytes()) report.states.push_back(static_cast<VarState>(c));
  if (!r.ok()) return r.status();
  return report;
}

// Rank 0: prints the table; returns true when all ranks match.
bool summarize(const ExpectedEnv& expected, const std::vector<RankReport>& reports) {
  const int world = static_cast<int>(reports.size());
  std::string set_ranks;
  for (int r = 0; r < world; ++r) {
    if (reports[static_cast<size_t>(r)].present) {
      set_ranks += (set_ranks.empty() ? "rank " : ", rank ") + std::to_string(r);
    }
  }
  if (!expected.present) {
    if (set_ranks.empty()) {
      std::printf("env check: skipped (BRIDGE_EXPECTED_ENV not set)\n");
      std::fflush(stdout);
      return true;
    }
    std::printf("env check: BRIDGE_EXPECTED_ENV is not set on rank 0 but is set on: %s\n",
                set_ranks.c_str());
    std::printf("env check: MISMATCH\n");
    std::fflush(stdout);
    return false;
  }
  const uint64_t reference = fnv1a64(canonical(expected));
  std::vector<bool> same_list(static_cast<size_t>(world));
  std::string other_list;
  for (int r = 0; r < world; ++r) {
    const RankReport& report = reports[static_cast<size_t>(r)];
    same_list[static_cast<size_t>(r)] =
        report.list_hash == reference && report.states.size() == expected.vars.size();
    if (!same_list[static_cast<size_t>(r)]) {
      other_list +=
          (other_list.empty() ? "" : ", ") + std::to_string(r) + (report.present ? "" : " (unset)");
    }
  }
  std::printf("env check: %zu variables, %d ranks\n", expected.vars.size(), world);
  bool all_ok = other_list.empty();
  if (!other_list.empty()) {
    std::printf("  BRIDGE_EXPECTED_ENV differs from rank 0's on ranks: %s\n", other_list.c_str());
  }
  size_t width = 0;
  for (const ExpectedVar& var : expected.vars) width = std::max(width, var.name.size());
  for (size_t v = 0; v < expected.vars.size(); ++v) {
    int ok = 0;
    std::string differ;
    for (int r = 0; r < world; ++r) {
      const RankReport& report = reports[static_cast<size_t>(r)];
      const char* state = "different list";
      if (same_list[static_cast<size_t>(r)]) {
        if (report.states[v] == VarState::kOk) {
          ++ok;
          continue;
        }
        state = state_name(report.states[v]);
      }
      differ += str_printf("%srank %d (%s)", differ.empty() ? "" : ", ", r, state);
    }
    if (ok != world) all_ok = false;
    std::printf("  %-*s  ranks ok: %d/%d%s%s\n", static_cast<int>(width),
                expected.vars[v].name.c_str(), ok, world,
                differ.empty() ? "" : "  differ: ", differ.c_str());
  }
  std::printf("env check: %s\n", all_ok ? "all ranks match" : "MISMATCH");
  std::fflush(stdout);
  return all_ok;
}

}  // namespace

ProbeResult<ExpectedEnv> parse_expected_env(std::string_view list) {
  ExpectedEnv expected;
  expected.present = true;
  std::set<std::string> seen;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find_first_of(";\n", start);
    if (end == std::string_view::npos) end = list.size();
    const std::string_view entry = trim(list.substr(start, end - start));
    start = end + 1;
    if (entry.empty() || entry.front() == '#') continue;
    ExpectedVar var;
    const size_t eq = entry.find('=');
    if (eq != std::string_view::npos) {
      var.name = std::string(trim(entry.substr(0, eq)));
      var.hash = std::string(trim(entry.substr(eq + 1)));
      if (!valid_hash(var.hash)) {
        return ProbeStatus(kExitUsage,
                           "BRIDGE_EXPECTED_ENV: entry '" + std::string(entry) +
                               "': expected NAME=HEX with 16 lowercase hex digits (FNV-1a 64)");
      }
    } else if (entry.back() == '?') {
      var.name = std::string(trim(entry.substr(0, entry.size() - 1)));
      var.compare_value = false;
    } else {
      return ProbeStatus(kExitUsage, "BRIDGE_EXPECTED_ENV: entry '" + std::string(entry) +
                                         "' is neither NAME=HEX nor NAME?");
    }
    if (!valid_name(var.name)) {
      return ProbeStatus(kExitUsage, "BRIDGE_EXPECTED_ENV: entry '" + std::string(entry) +
                                         "': invalid variable name");
    }
    if (!seen.insert(var.name).second) {
      return ProbeStatus(kExitUsage,
                         "BRIDGE_EXPECTED_ENV: variable " + var.name + " is listed twice");
    }
    expected.vars.push_back(std::move(var));
  }
  return expected;
}

ProbeResult<ExpectedEnv> load_expected_env() {
  const char* value = std::getenv("BRIDGE_EXPECTED_ENV");
  if (value == nullptr || *value == '\0') return ExpectedEnv{};
  const std::string_view text = value;
  if (text.front() != '@') return parse_expected_env(text);
  const std::string path(text.substr(1));
  std::ifstream file(path, std::ios::binary);
  if (!file.is_open()) {
    return ProbeStatus(kExitUsage,
                       "BRIDGE_EXPECTED_ENV: cannot open '" + path + "': " + std::strerror(errno));
  }
  std::stringstream content;
  content << file.rdbuf();
  if (file.bad()) {
    return ProbeStatus(kExitUsage, "BRIDGE_EXPECTED_ENV: cannot read '" + path + "'");
  }
  return parse_expected_env(content.str());
}

ProbeStatus dump_env(const ExpectedEnv& expected, const std::string& dir, int rank) {
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) {
    return ProbeStatus(kExitInternal,
                       "--dump-env-dir: cannot create '" + dir + "': " + std::strerror(errno));
  }
  for (const ExpectedVar& var : expected.vars) {
    const char* value = std::getenv(var.name.c_str());
    if (value == nullptr) continue;
    const std::string path = dir + "/rank" + std::to_string(rank) + "." + var.name;
    std::FILE* file = std::fopen(path.c_str(), "wb");
    const size_t size = std::strlen(value);
    const bool ok = file != nullptr && std::fwrite(value, 1, size, file) == size;
    if (file == nullptr || std::fclose(file) != 0 || !ok) {
      return ProbeStatus(kExitInternal,
                         "--dump-env-dir: cannot write '" + path + "': " + std::strerror(errno));
    }
  }
  return {};
}

std::string device_connections_line(const char* value) {
  const std::string shown = value == nullptr ? "unset" : "'" + std::string(value) + "'";
  return "env check: CUDA_DEVICE_MAX_CONNECTIONS is " + shown +
         " on rank 0 (launch env). It sets how many hardware queues a GPU feeds kernels "
         "through, which decides whether communication kernels can run beside compute; "
         "bridge-probe is a CPU emulation without GPU queues, so it cannot show its effect";
}

ProbeResult<bool> run_env_check(const ExpectedEnv& expected, Cluster& cluster) {
  const std::string mine = encode_report(expected, evaluate(expected));
  const ProbeResult<std::vector<std::string>> gathered = gather_to_root(cluster, mine, "env check");
  if (!gathered.ok()) return gathered.status();
  std::string verdict;
  if (cluster.rank == 0) {
    std::vector<RankReport> reports;
    for (const std::string& data : *gathered) {
      ProbeResult<RankReport> report = decode_report(data);
      if (!report.ok()) return report.status();
      reports.push_back(std::move(*report));
    }
    verdict = summarize(expected, reports) ? "ok" : "mismatch";
    std::printf("%s\n",
                device_connections_line(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS")).c_str());
    std::fflush(stdout);
  }
  const ProbeResult<std::string> shared = broadcast_from_root(cluster, verdict, "env check");
  if (!shared.ok()) return shared.status();
  return *shared == "ok";
}

}  // namespace bridge::probe
