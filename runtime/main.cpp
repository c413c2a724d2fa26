// bridge-probe: the built-in overlap runtime of bridge-launch (docs/probe.md describes what it
// checks and prints).
//
// Order of work on every rank: flags and identity, BRIDGE_EXPECTED_ENV and BRIDGE_EXPECTED_PLAN
// parsing (and the optional --dump-env-dir), rendezvous into a ring, the collective env check,
// the collective plan check, the training loop, and a final barrier, after which rank 0 prints
// `bridge-probe: OK`. Both checks run after the rendezvous so that a mismatch on one rank reaches
// every rank as a verdict (all exit 3) instead of leaving the others waiting for it. Every
// failure ends in Fatal() with the exit code documented in probe_error.h.
#include <cstdio>
#include <exception>

#include "runtime/env_check.h"
#include "runtime/options.h"
#include "runtime/plan_check.h"
#include "runtime/probe_error.h"
#include "runtime/train_loop.h"
#include "runtime/transport.h"

namespace bridge::probe {
namespace {

void PrintRendezvous(const Cluster& cluster, const Identity& identity) {
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

int Run(int argc, char** argv) {
  const Options options = ParseOptions(argc, argv);
  if (options.help) {
    std::fputs(Usage().c_str(), stdout);
    return kExitOk;
  }
  const Identity identity = ReadIdentity();
  SetLogRank(identity.rank);
  ValidateOptionsForWorld(options, identity);
  const ExpectedEnv expected = LoadExpectedEnv();
  if (!options.dump_env_dir.empty()) DumpEnv(expected, options.dump_env_dir, identity.rank);
  const ExpectedPlan plan = LoadExpectedPlan();

  Cluster cluster = Rendezvous(identity, options.timeout_s);
  if (cluster.rank == 0) PrintRendezvous(cluster, identity);
  if (!RunEnvCheck(expected, cluster)) {
    throw ProbeError(kExitEnvMismatch,
                     "environment check failed (see the env check table on rank 0)");
  }
  if (!RunPlanCheck(plan, options, identity, cluster)) {
    throw ProbeError(kExitEnvMismatch, "plan check failed (see the plan check table on rank 0)");
  }
  const TrainingReport report = RunTraining(options, cluster);
  if (cluster.rank == 0) PrintTrainingSummary(options, report);
  Barrier(cluster, "shutdown");
  if (cluster.rank == 0) {
    std::printf("bridge-probe: OK\n");
    std::fflush(stdout);
  }
  return kExitOk;
}

}  // namespace
}  // namespace bridge::probe

int main(int argc, char** argv) {
  using bridge::probe::Fatal;
  try {
    return bridge::probe::Run(argc, argv);
  } catch (const bridge::probe::ProbeError& e) {
    Fatal(e.exit_code(), e.what());
  } catch (const std::exception& e) {
    Fatal(bridge::probe::kExitInternal, e.what());
  }
}
