// `why` and `status` at scale (docs/performance.md, "Triage and status at scale"):
// - BM_WhyOver4096RankLogs: the Slurm executor's failure evidence and the triage of a
//   4096-rank job (512 nodes of 8) whose rank logs hold 400 lines each; rank 2741 failed first
//   with a CUDA error, srun reported it and the 4095 others as stopped, and the others printed
//   NCCL's "connection closed" before they stopped. Target: under 1 s of wall time, what the
//   user waits for (the logs are read by up to 8 threads, so the CPU time of the benchmark's
//   own thread would understate it).
// - BM_StatusOver1000Entries: `bridge-launch status` (the command itself, through run_cli)
//   over a registry of 1000 ended jobs, which needs no scheduler query. Target: under 20 ms.
// The files are written once per process into a temporary directory and removed at exit.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "executors/executor.h"
#include "jobs/failure_triage.h"
#include "jobs/registry.h"
#include "launcher/cli.h"
#include "launcher/services.h"
#include "tests/support/fake_services.h"

namespace bridge {
namespace {

namespace fs = std::filesystem;

constexpr int kRanks = 4096;
constexpr int kRanksPerNode = 8;
constexpr int kLinesPerLog = 400;
constexpr int kFirstFailure = 2741;

// A directory that lives as long as the process.
class ScratchDir {
 public:
  ScratchDir() : path_(fs::temp_directory_path() / fmt::format("bridge-bench-{}", getpid())) {
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

ScratchDir& scratch() {
  static ScratchDir dir;
  return dir;
}

// Megatron-like training output: iteration lines, then how each rank ended.
void write_rank_log(const fs::path& path, int rank) {
  std::ofstream out(path);
  for (int i = 0; i < kLinesPerLog - 4; ++i)
    out << fmt::format(
        " [2026-12-02 08:{:02}:{:02}] iteration {:>6}/ 100000 | consumed samples: {:>10} | "
        "elapsed time per iteration (ms): 412.7 | learning rate: 3.0E-04 | lm loss: 2.4183E+00\n",
        i / 60 % 60, i % 60, i + 1, (i + 1) * 1024);
  if (rank == kFirstFailure) {
    out << "Traceback (most recent call last):\n"
        << "  File \"pretrain_gpt.py\", line 42, in <module>\n"
        << "RuntimeError: CUDA error: an illegal memory access was encountered\n";
  } else {
    out << fmt::format("[rank{}]: NCCL WARN NET/Socket : Connection closed by remote peer\n", rank)
        << "[rank: watchdog] ProcessGroupNCCL caught collective operation timeout\n"
        << "srun: forcing job termination\n";
  }
}

// A Slurm job dir as the batch script leaves it: rank logs, the hosts file, and the batch
// stderr with srun's task reports.
JobRecord write_failed_slurm_job() {
  fs::path dir = scratch().path() / "why" / "job-1";
  fs::create_directories(dir);
  for (int r = 0; r < kRanks; ++r) write_rank_log(dir / fmt::format("rank{}.log", r), r);
  std::ofstream hosts(dir / "hosts");
  for (int n = 0; n < kRanks / kRanksPerNode; ++n) hosts << fmt::format("node{:04}\n", n);
  std::ofstream err(dir / "slurm-4242.err");
  err << fmt::format("srun: error: node{:04}: task {}: Exited with exit code 17\n",
                     kFirstFailure / kRanksPerNode, kFirstFailure)
      << fmt::format("srun: error: node0000: tasks 0-{},{}-{}: Terminated\n", kFirstFailure - 1,
                     kFirstFailure + 1, kRanks - 1);
  JobRecord job;
  job.id = "why-bench-20261202-080000-ab12";
  job.name = "why-bench";
  job.executor = "slurm";
  job.scheduler_id = "4242";
  job.job_dir = dir.string();
  job.nodes = kRanks / kRanksPerNode;
  job.ranks = kRanks;
  job.state = JobState::kFailed;
  return job;
}

void BM_WhyOver4096RankLogs(benchmark::State& state) {
  static const JobRecord job = write_failed_slurm_job();
  testing::TestServices seams;
  std::unique_ptr<Executor> slurm = make_executor(executor_registry(), "slurm", seams.services());
  for (auto _ : state) {
    Diagnostics diags;
    Triage t = triage(slurm->failure_evidence(job, diags));
    if (!t.first || t.first->rank != kFirstFailure)
      state.SkipWithError("triage did not name the rank that failed first");
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(BM_WhyOver4096RankLogs)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();

// A registry of 1000 jobs that have ended (status asks no scheduler about them).
std::string write_registry() {
  fs::path state_dir = scratch().path() / "state";
  testing::TestServices seams;
  JobRegistry registry(state_dir.string(), seams.registry_seams());
  for (int i = 0; i < 1000; ++i) {
    JobRecord r;
    r.id = fmt::format("bench-20261202-08{:04}-{:04x}", i, i);
    r.name = "bench";
    r.executor = i % 2 ? "slurm" : "kubernetes";
    r.scheduler_id = std::to_string(1000 + i);
    r.job_dir = "/lustre/jobs/bench/" + r.id;
    r.nodes = 2;
    r.ranks = 16;
    r.state = i % 10 ? JobState::kSucceeded : JobState::kFailed;
    Diagnostics diags;
    if (!registry.put(r, diags, /*create=*/true)) return {};
  }
  return state_dir.string();
}

void BM_StatusOver1000Entries(benchmark::State& state) {
  static const std::string state_dir = write_registry();
  testing::TestServices seams;
  seams.env.set("BRIDGE_LAUNCH_STATE_DIR", state_dir);
  Services services = seams.command_services(state_dir);
  for (auto _ : state) {
    std::ostringstream out, err;
    int code = run_cli({"status"}, out, err, services);
    if (code != 0 || out.str().find("bench-20261202-080999") == std::string::npos)
      state.SkipWithError("status did not list the registry");
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_StatusOver1000Entries)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace bridge
