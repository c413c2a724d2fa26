#include "executors/rank_logs.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <vector>

#include "base/numbers.h"
#include "base/parallel_for.h"
#include "system/file_read.h"
#include "system/log_tail.h"

namespace bridge {

namespace fs = std::filesystem;

namespace {

std::map<int, fs::path> numbered_files(const fs::path& dir, const std::regex& kName) {
  std::map<int, fs::path> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    std::string name = e.path().filename().string();
    if (!std::regex_match(name, m, kName)) continue;
    // rank99999999999.log is no rank of any job: skip it rather than fail.
    if (auto rank = parse_decimal<int>(m[1].str())) files[*rank] = e.path();
  }
  return files;
}

std::map<int, fs::path> rank_files(const fs::path& dir) {
  static const std::regex kName(R"(rank(\d+)\.log)");
  return numbered_files(dir, kName);
}

// "rank 3" or "rank 3 node2": the label `logs` prefixes each line with.
std::string rank_label(int rank, const std::string& host) {
  return host.empty() ? fmt::format("rank {}", rank) : fmt::format("rank {} {}", rank, host);
}

RankEvidence unit_from_file(const fs::path& path, std::string label) {
  RankEvidence u;
  u.label = std::move(label);
  u.log_path = path.string();
  // 128 KiB per unit: a traceback and what led to it, while 4096 ranks stay near 512 MiB read.
  u.lines = read_last_lines(path, kTriageTailLines, size_t{128} * 1024, u.first_line_number);
  return u;
}

// One unit per file, read in parallel (base/parallel_for.h): a 4096-rank job's logs are about
// 240 MiB of tails. The order is the files' order.
std::vector<RankEvidence> units_from_files(const std::map<int, fs::path>& files, bool per_node) {
  std::vector<std::pair<int, const fs::path*>> order;
  order.reserve(files.size());
  for (const auto& [n, path] : files) order.emplace_back(n, &path);
  std::vector<RankEvidence> units(order.size());
  parallel_for(order.size(), /*min_per_thread=*/64, [&](size_t i) {
    const auto& [n, path] = order[i];
    units[i] = unit_from_file(*path, fmt::format("{} {}", per_node ? "node" : "rank", n));
    (per_node ? units[i].node : units[i].rank) = n;
  });
  return units;
}

}  // namespace

std::vector<RankEvidence> job_dir_evidence(const std::string& job_dir) {
  std::vector<RankEvidence> units = units_from_files(rank_files(job_dir), /*per_node=*/false);
  if (!units.empty()) return units;
  static const std::regex kNode(R"(node(\d+)\.log)");
  return units_from_files(numbered_files(job_dir, kNode), /*per_node=*/true);
}

RankEvidence job_dir_unit_evidence(const std::string& job_dir, int n, bool per_node) {
  fs::path path = fs::path(job_dir) / fmt::format("{}{}.log", per_node ? "node" : "rank", n);
  RankEvidence u = unit_from_file(path, fmt::format("{} {}", per_node ? "node" : "rank", n));
  (per_node ? u.node : u.rank) = n;
  return u;
}

bool check_log_query(const JobRecord& job, const LogQuery& query, Diagnostics& diags) {
  int ranks = std::max(1, job.ranks), nodes = std::max(1, job.nodes);
  if (query.rank && (*query.rank < 0 || *query.rank >= ranks)) {
    diags.error(
        "bad-rank", "", {},
        fmt::format("job {} has ranks 0..{}; there is no rank {}", job.id, ranks - 1, *query.rank));
    return false;
  }
  if (query.node && (*query.node < 0 || *query.node >= nodes)) {
    diags.error(
        "bad-node", "", {},
        fmt::format("job {} has nodes 0..{}; there is no node {}", job.id, nodes - 1, *query.node),
        nodes == 1 ? "a job on one node has only node 0"
                   : "nodes are numbered in the scheduler's order (SLURM_NODEID, pod "
                     "completion index)");
    return false;
  }
  return true;
}

int ranks_per_node(const JobRecord& job) {
  return std::max(1, std::max(1, job.ranks) / std::max(1, job.nodes));
}

std::vector<std::string> job_dir_hosts(const std::string& job_dir) {
  std::vector<std::string> hosts;
  if (job_dir.empty()) return hosts;
  // One short host name a node: 4 MiB is far above any allocation's list, and a FIFO or a
  // link in its place is no list (system/file_read.h).
  StatusOr<std::string> text = read_regular_file(fs::path(job_dir) / "hosts", size_t{4} << 20);
  std::istringstream in(text.ok() ? *text : std::string());
  std::string line;
  // A host name is short; anything else is not a file of ours: stop at a bounded count.
  while (hosts.size() < 100000 && std::getline(in, line)) {
    if (line.size() > 255) break;
    hosts.push_back(line);
  }
  return hosts;
}

int print_rank_logs(const JobRecord& job, const LogQuery& query,
                    const std::function<std::string(int)>& host_of_node, std::ostream& out,
                    Diagnostics& diags, Sleeper& sleeper,
                    const std::function<bool()>& still_running) {
  const int per_node = ranks_per_node(job);
  auto selected = [&](int r) {
    if (query.rank) return r == *query.rank;
    if (query.node) return r / per_node == *query.node;
    return true;
  };
  std::map<int, LogTail> tails;
  bool any = false;
  bool prefix = !query.rank && std::max(1, job.ranks) > 1;
  for (;;) {
    bool running = query.follow && still_running();
    auto files = rank_files(job.job_dir);
    if (query.rank && !files.count(*query.rank) && !running) {
      diags.error("no-log", "", {},
                  fmt::format("no log for rank {} in {} (ranks with logs: {})", *query.rank,
                              job.job_dir, files.size()));
      return 1;
    }
    for (const auto& [r, path] : files) {
      if (!selected(r)) continue;
      any = true;
      auto [tail, added] = tails.try_emplace(r, rank_label(r, host_of_node(r / per_node)), path);
      if (added && query.tail) tail->second.start_at_last_lines(*query.tail);
      tail->second.pump(out, prefix, /*final=*/!running, query.grep);
    }
    if (!running) break;
    sleeper.pause_for(std::chrono::milliseconds(500));
  }
  if (!any) {
    diags.error(
        "no-log", "", {},
        fmt::format("no rank logs{} in {}",
                    query.node ? fmt::format(" of node {}", *query.node) : "", job.job_dir));
    return 1;
  }
  return 0;
}

void PendingNotice::update(const JobRecord& job, const JobStatus& status, std::ostream& notes) {
  if (status.state == JobState::kPending) {
    std::string reason =
        status.pending_reason.empty() ? "no reason given by the scheduler" : status.pending_reason;
    if (waiting_ && reason == reason_) return;
    notes << fmt::format("bridge-launch: job {} is PENDING ({}); its logs follow once it starts\n",
                         job.id, reason)
          << std::flush;
    waiting_ = true;
    reason_ = std::move(reason);
    return;
  }
  if (waiting_ && status.state == JobState::kRunning)
    notes << fmt::format("bridge-launch: job {} is RUNNING\n", job.id) << std::flush;
  waiting_ = false;
}

std::vector<std::string> Executor::rank_log_tail(const JobRecord& job, int rank,
                                                 size_t max_lines) const {
  if (job.job_dir.empty()) return {};
  fs::path dir(job.job_dir);
  fs::path path = dir / fmt::format("rank{}.log", rank);
  std::error_code ec;
  // Under a per-node launcher (torchrun) a node's ranks share node<N>.log.
  if (!fs::exists(path, ec)) path = dir / fmt::format("node{}.log", rank / ranks_per_node(job));
  size_t first_line = 0;
  return read_last_lines(path, max_lines, size_t{64} * 1024, first_line);
}

std::optional<PlanConfirmationVerdict> Executor::plan_confirmation(const JobRecord& job) const {
  if (!recorded_plan_confirms(job.plan_json)) return std::nullopt;
  return read_plan_confirmation(job.job_dir);
}

}  // namespace bridge
