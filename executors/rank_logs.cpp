#include "executors/rank_logs.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include "executors/log_tail.h"
#include "launcher/numbers.h"

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

RankEvidence unit_from_file(const fs::path& path, std::string label) {
  RankEvidence u;
  u.label = std::move(label);
  u.log_path = path.string();
  // 128 KiB per unit: a traceback and what led to it, while 4096 ranks stay near 512 MiB read.
  u.lines = read_last_lines(path, kTriageTailLines, size_t{128} * 1024, u.first_line_number);
  return u;
}

}  // namespace

std::vector<RankEvidence> job_dir_evidence(const std::string& job_dir) {
  std::vector<RankEvidence> units;
  for (const auto& [r, path] : rank_files(job_dir)) {
    units.push_back(unit_from_file(path, fmt::format("rank {}", r)));
    units.back().rank = r;
  }
  if (!units.empty()) return units;
  static const std::regex kNode(R"(node(\d+)\.log)");
  for (const auto& [n, path] : numbered_files(job_dir, kNode)) {
    units.push_back(unit_from_file(path, fmt::format("node {}", n)));
    units.back().node = n;
  }
  return units;
}

int print_rank_logs(const std::string& job_dir, std::optional<int> rank, bool follow,
                    std::ostream& out, Diagnostics& diags, Sleeper& sleeper,
                    const std::function<bool()>& still_running) {
  std::map<int, LogTail> tails;
  bool any = false;
  for (;;) {
    bool running = follow && still_running();
    auto files = rank_files(job_dir);
    if (rank && !files.count(*rank) && !running) {
      diags.error("no-log", "", {},
                  fmt::format("no log for rank {} in {} (ranks with logs: {})", *rank, job_dir,
                              files.size()));
      return 1;
    }
    for (const auto& [r, path] : files) {
      if (rank && r != *rank) continue;
      any = true;
      auto tail = tails.try_emplace(r, fmt::format("rank {}", r), path).first;
      tail->second.pump(out, /*prefix=*/!rank, /*final=*/!running);
    }
    if (!running) break;
    sleeper.sleep_for(std::chrono::milliseconds(500));
  }
  if (!any) {
    diags.error("no-log", "", {}, fmt::format("no rank logs in {}", job_dir));
    return 1;
  }
  return 0;
}

}  // namespace bridge
