#include "jobs/job_checkpoint.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <system_error>

#include "base/numbers.h"
#include "base/utf8.h"
#include "jobs/job_progress.h"
#include "system/file_read.h"

namespace bridge {

namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxTrackerBytes = 64;
constexpr size_t kMaxEntries = 100000;

std::string iteration_dir(const std::string& root, int64_t iteration) {
  return fmt::format("{}/iter_{:07d}", root, iteration);
}

// The modification time of `path` as UTC text; "" when it cannot be read.
std::string modified_at(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  return utc_time_text(SystemTime(std::chrono::seconds(st.st_mtim.tv_sec)));
}

std::optional<int64_t> tracked_iteration(const std::string& root) {
  StatusOr<std::string> text =
      read_regular_file(root + "/latest_checkpointed_iteration.txt", kMaxTrackerBytes);
  if (!text.ok()) return std::nullopt;
  std::string digits = *text;
  while (!digits.empty() && (digits.back() == '\n' || digits.back() == ' ')) digits.pop_back();
  std::optional<int64_t> value = parse_decimal<int64_t>(digits);
  if (!value || *value < 0) return std::nullopt;
  return value;
}

// The highest iter_NNNNNNN directory, or 0.
int64_t newest_iteration_dir(const std::string& root) {
  int64_t newest = 0;
  size_t seen = 0;
  std::error_code ec;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end && seen < kMaxEntries;
       it.increment(ec), ++seen) {
    const std::string name = it->path().filename().string();
    if (name.size() != 12 || name.rfind("iter_", 0) != 0) continue;
    std::optional<int64_t> value = parse_decimal<int64_t>(name.substr(5));
    if (value && *value > newest && it->is_directory(ec)) newest = *value;
  }
  return newest;
}

// The recipe's checkpoint.dir as the job recorded it; nullopt for a job without checkpoints.
std::optional<std::string> recorded_checkpoint_dir(const JobRecord& record) {
  auto dir = record.knobs.find("checkpoint.dir");
  if (dir == record.knobs.end() || dir->second.empty() || dir->second == "null")
    return std::nullopt;
  return dir->second;
}

}  // namespace

std::optional<CheckpointState> newest_checkpoint(const JobRecord& record) {
  std::optional<std::string> dir = recorded_checkpoint_dir(record);
  if (!dir) return std::nullopt;
  CheckpointState c;
  c.dir = *dir;
  std::error_code ec;
  if (!fs::is_directory(c.dir, ec)) {
    c.why_none = "the directory is not there (yet), or not on a file system this machine sees";
    return c;
  }
  if (std::optional<int64_t> tracked = tracked_iteration(c.dir)) {
    c.iteration = *tracked;
    c.source = "tracker";
  } else if (int64_t newest = newest_iteration_dir(c.dir); newest > 0) {
    c.iteration = newest;
    c.source = "newest iter_ directory";
  } else {
    c.why_none = "no checkpoint saved yet";
    return c;
  }
  c.found = true;
  c.saved_at = modified_at(iteration_dir(c.dir, c.iteration));
  return c;
}

std::optional<int64_t> resumed_iteration_in(const std::string& text) {
  static const std::regex kResumed(
      R"((?:successfully loaded checkpoint from .* at iteration|rank 0 resumes from checkpoint iteration) ([0-9]{1,12}))");
  std::smatch m;
  if (!std::regex_search(text, m, kResumed)) return std::nullopt;
  return parse_decimal<int64_t>(m[1].str());
}

std::optional<int64_t> resumed_iteration(const JobRecord& record) {
  // Only a job that has checkpoints resumes; the recorded knob says so without listing the
  // checkpoint directory.
  if (!recorded_checkpoint_dir(record) || record.job_dir.empty()) return std::nullopt;
  constexpr size_t kHead = size_t{256} * 1024;
  StatusOr<RegularFile> log = open_regular_file(record.job_dir + "/rank0.log");
  if (!log.ok()) return std::nullopt;
  StatusOr<std::string> head = log->read_at(0, kHead);
  if (!head.ok()) return std::nullopt;
  return resumed_iteration_in(*head);
}

std::string checkpoint_text(const CheckpointState& c) {
  if (!c.found) return fmt::format("none in {} ({})", printable_text(c.dir, 200), c.why_none);
  return fmt::format("iteration {}{}{} ({})", c.iteration,
                     c.saved_at.empty() ? "" : ", saved " + c.saved_at,
                     c.source == "tracker" ? "" : ", the " + c.source,
                     printable_text(iteration_dir(c.dir, c.iteration), 200));
}

nlohmann::ordered_json checkpoint_to_json(const CheckpointState& c) {
  nlohmann::ordered_json j{{"dir", c.dir}, {"found", c.found}};
  if (c.found) {
    j["iteration"] = c.iteration;
    j["saved_at"] =
        c.saved_at.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.saved_at);
    j["source"] = c.source;
  } else {
    j["why_none"] = c.why_none;
  }
  return j;
}

}  // namespace bridge
