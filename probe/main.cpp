// bridge-probe: the built-in overlap runtime of bridge-launch (docs/probe.md describes what it
// checks and prints).
//
// Order of work on every rank: flags and identity, the CPU and memory binding the rank runs
// under (one line, binding_report.h), BRIDGE_EXPECTED_ENV and BRIDGE_EXPECTED_PLAN
// parsing (and the optional --dump-env-dir), rendezvous into a ring, the collective env check,
// the collective plan check, the training loop, and a final barrier, after which rank 0 prints
// `bridge-probe: OK`. Both checks run after the rendezvous so that a mismatch on one rank reaches
// every rank as a verdict (all exit 3) instead of leaving the others waiting for it. Every
// failure comes back to main() as a ProbeStatus and ends in fatal() with the exit code
// documented in probe_error.h; main's one catch is the last resort for what the standard
// library throws (std::bad_alloc, std::system_error), which ends as exit 1.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "probe/binding_report.h"
#include "probe/env_check.h"
#include "probe/options.h"
#include "probe/plan_check.h"
#include "probe/probe_error.h"
#include "probe/train_loop.h"
#include "probe/transport.h"

namespace bridge::probe {
namespace {

void print_rendezvous(const Cluster& cluster, const Identity& identity) {
  if (cluster.world_size == 1) {
    std::printf("bridge-probe: single rank (WORLD_SIZE=1), no rendezvous\n");
  } else {
    std::printf(
        "bridge-probe: rendezvous complete: %d ranks via %s (port from %s, identity from "
        "%s)\n",
        cluster.world_size, cluster.master_endpoint.c_str(),
        identity.rendezvous_port_source.c_str(), identity.rank_source.c_str());
    for (const PeerInfo& peer : cluster.peers) {
      std::printf("  rank %d: node %d, local rank %d, host %s, ring %s:%d\n", peer.rank,
                  peer.node_rank, peer.local_rank, peer.hostname.c_str(), peer.address.c_str(),
                  peer.ring_port);
    }
  }
  std::fflush(stdout);
}

// --expect-file: the files the job must see (e.g. a marker in the shipped source tree). Each
// rank reports its own line, so a node that lacks the file is named.
ProbeStatus check_expected_files(const Options& options, int rank) {
  const char* code_dir = std::getenv("BRIDGE_CODE_DIR");
  for (const std::string& spec : options.expect_files) {
    size_t eq = spec.find('=');
    std::string path = spec.substr(0, eq);
    if (path.front() != '/' && code_dir && *code_dir) path = std::string(code_dir) + "/" + path;
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::printf("file check: rank %d: %s missing\n", rank, path.c_str());
      return ProbeStatus(kExitEnvMismatch, "file check failed: " + path + " is missing");
    }
    std::ostringstream bytes;
    bytes << in.rdbuf();
    std::string content = bytes.str();
    if (!content.empty() && content.back() == '\n') content.pop_back();
    if (eq != std::string::npos && content != spec.substr(eq + 1)) {
      std::printf("file check: rank %d: %s differs ('%s')\n", rank, path.c_str(),
                  content.substr(0, 80).c_str());
      return ProbeStatus(kExitEnvMismatch, "file check failed: " + path + " differs");
    }
    std::printf("file check: rank %d: %s ok (%zu bytes)\n", rank, path.c_str(), content.size());
  }
  std::fflush(stdout);
  return {};
}

// Reads everything the collective part needs: identity, the expected env and plan.
struct Inputs {
  Identity identity;
  ExpectedEnv expected;
  ExpectedPlan plan;
};

ProbeResult<Inputs> read_inputs(const Options& options) {
  ProbeResult<Identity> identity = read_identity();
  if (!identity.ok()) return identity.status();
  set_log_rank(identity->rank);
  // Every rank, before anything can fail collectively: the binding it runs under.
  std::printf("%s\n", binding_report_line(identity->rank).c_str());
  std::fflush(stdout);
  if (ProbeStatus status = validate_options_for_world(options, *identity); !status.ok()) {
    return status;
  }
  ProbeResult<ExpectedEnv> expected = load_expected_env();
  if (!expected.ok()) return expected.status();
  if (!options.dump_env_dir.empty()) {
    ProbeStatus dumped = dump_env(*expected, options.dump_env_dir, identity->rank);
    if (!dumped.ok()) return dumped;
  }
  if (ProbeStatus files = check_expected_files(options, identity->rank); !files.ok()) return files;
  ProbeResult<ExpectedPlan> plan = load_expected_plan();
  if (!plan.ok()) return plan.status();
  return Inputs{std::move(*identity), std::move(*expected), std::move(*plan)};
}

// The collective part: both checks, the training loop and the final barrier.
ProbeStatus run_checks_and_training(const Options& options, const Inputs& inputs,
                                    Cluster& cluster) {
  watch_for_termination();
  const ProbeResult<bool> env_ok = run_env_check(inputs.expected, cluster);
  if (!env_ok.ok()) return env_ok.status();
  if (!*env_ok) {
    return ProbeStatus(kExitEnvMismatch,
                       "environment check failed (see the env check table on rank 0)");
  }
  const ProbeResult<bool> plan_ok = run_plan_check(inputs.plan, options, inputs.identity, cluster);
  if (!plan_ok.ok()) return plan_ok.status();
  if (!*plan_ok) {
    return ProbeStatus(kExitEnvMismatch, "plan check failed (see the plan check table on rank 0)");
  }
  const ProbeResult<TrainingReport> report = run_training(options, cluster);
  if (!report.ok()) return report.status();
  if (cluster.rank == 0) print_training_summary(options, *report);
  return barrier(cluster, "shutdown");
}

ProbeStatus run(int argc, char** argv) {
  const ProbeResult<Options> options = parse_options(argc, argv);
  if (!options.ok()) return options.status();
  if (options->help) {
    std::fputs(usage().c_str(), stdout);
    return {};
  }
  const ProbeResult<Inputs> inputs = read_inputs(*options);
  if (!inputs.ok()) return inputs.status();
  ProbeResult<Cluster> cluster = rendezvous(inputs->identity, options->timeout_s);
  if (!cluster.ok()) return cluster.status();
  if (cluster->rank == 0) print_rendezvous(*cluster, inputs->identity);
  if (ProbeStatus status = run_checks_and_training(*options, *inputs, *cluster); !status.ok()) {
    return status;
  }
  if (cluster->rank == 0) {
    std::printf("bridge-probe: OK\n");
    std::fflush(stdout);
  }
  if (cluster->rank == options->hang_at_exit_rank) {
    log_warning("--hang-at-exit-rank: training is done; sleeping instead of exiting");
    sleep_until_terminated();
  }
  return {};
}

}  // namespace
}  // namespace bridge::probe

int main(int argc, char** argv) {
  using bridge::probe::fatal;
  try {
    const bridge::probe::ProbeStatus status = bridge::probe::run(argc, argv);
    if (!status.ok()) fatal(status);
    return bridge::probe::kExitOk;
  } catch (const std::exception& e) {
    // Last resort: only the standard library throws (std::bad_alloc, std::system_error).
    fatal(bridge::probe::kExitInternal, e.what());
  }
}
