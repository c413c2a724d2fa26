#include "launcher/jobs/registry.h"

#include <fcntl.h>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "launcher/json_limits.h"

namespace bridge {

namespace fs = std::filesystem;

namespace {

// Holds an exclusive flock on <dir>/lock for its lifetime. Another process holding the lock
// (a stuck bridge-launch, a `flock` by hand) must not block a launch silently: after a second
// it says that it waits, and after `timeout` it gives up (errno EWOULDBLOCK).
class DirLock {
 public:
  DirLock(const fs::path& dir, std::chrono::milliseconds timeout) {
    fd_ = open((dir / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0) return;
    auto start = std::chrono::steady_clock::now();
    bool said = false;
    while (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      auto waited = std::chrono::steady_clock::now() - start;
      if ((errno != EWOULDBLOCK && errno != EINTR) || waited > timeout) {
        int saved = errno;
        close(fd_);
        fd_ = -1;
        errno = saved;
        return;
      }
      if (!said && waited > std::chrono::seconds(1)) {
        spdlog::warn("waiting for the job registry lock {} (held by another process)",
                     (dir / "lock").string());
        said = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~DirLock() {
    if (fd_ >= 0) close(fd_);  // closing releases the lock
  }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

bool write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool valid_id(const std::string& id) {
  return !id.empty() && id.find('/') == std::string::npos && id[0] != '.';
}

}  // namespace

std::string JobRegistry::default_dir(const HostEnvironment& env) {
  if (auto d = env.get("BRIDGE_LAUNCH_STATE_DIR"); d && !d->empty()) return *d;
  if (auto x = env.get("XDG_STATE_HOME"); x && !x->empty()) return *x + "/bridge-launch";
  return env.get("HOME").value_or("/tmp") + "/.local/state/bridge-launch";
}

namespace {
fs::path reservation_path(const fs::path& jobs, const std::string& id) {
  return jobs / ("." + id + ".reservation");
}
}  // namespace

std::optional<std::string> JobRegistry::reserve_id(const std::string& name,
                                                   const std::string& sample,
                                                   Diagnostics& diags) const {
  fs::path jobs = fs::path(dir_) / "jobs";
  std::error_code ec;
  fs::create_directories(jobs, ec);
  auto fail = [&](const std::string& why) -> std::optional<std::string> {
    diags.error(
        "registry-unwritable", "", {},
        fmt::format("the job registry {} is not writable ({}); nothing was submitted", dir_, why),
        "fix the permissions or free space, or set BRIDGE_LAUNCH_STATE_DIR");
    return std::nullopt;
  };
  if (ec) return fail(ec.message());
  DirLock lock(dir_, lock_timeout_);
  if (!lock.ok()) return fail(lock_error());
  for (int attempt = 0; attempt < 64; ++attempt) {
    std::string id = new_job_id(name);
    if (fs::exists(jobs / (id + ".json"), ec)) continue;
    fs::path reservation = reservation_path(jobs, id);
    int fd = open(reservation.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) return fail(std::strerror(errno));
    bool ok = write_all(fd, sample) && fsync(fd) == 0;  // a full disk shows only at fsync
    int saved = errno;
    close(fd);
    if (!ok) {
      fs::remove(reservation, ec);
      return fail(std::strerror(saved));
    }
    return id;
  }
  return fail("no free job id after 64 attempts");
}

std::string JobRegistry::lock_error() const {
  if (errno == EWOULDBLOCK)
    return fmt::format("cannot lock: {}/lock is held by another process (waited {} ms)", dir_,
                       lock_timeout_.count());
  return std::string("cannot lock: ") + std::strerror(errno);
}

void JobRegistry::release_id(const std::string& id) const {
  std::error_code ec;
  if (valid_id(id)) fs::remove(reservation_path(fs::path(dir_) / "jobs", id), ec);
}

bool JobRegistry::put(const JobRecord& r, Diagnostics& diags, bool create) const {
  fs::path jobs = fs::path(dir_) / "jobs";
  std::error_code ec;
  fs::create_directories(jobs, ec);
  auto fail = [&](const std::string& what) {
    diags.error("registry-write", "", {},
                fmt::format("cannot record job {} in the registry {}: {}", r.id, dir_, what),
                "check that the directory is writable and the disk not full "
                "(set BRIDGE_LAUNCH_STATE_DIR or XDG_STATE_HOME to move it)");
    return false;
  };
  if (ec) return fail(ec.message());
  if (!valid_id(r.id)) return fail("invalid job id");
  DirLock lock(dir_, lock_timeout_);
  if (!lock.ok()) return fail(lock_error());
  fs::path target = jobs / (r.id + ".json");
  // Under the lock, so no other bridge-launch can create the entry in between.
  if (create && fs::exists(target, ec))
    return fail("an entry with this id exists already; entries are never overwritten");
  fs::path tmp = jobs / fmt::format(".{}.{}.tmp", r.id, getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return fail(std::strerror(errno));
  std::string text =
      job_record_to_json(r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  bool ok = write_all(fd, text) && fsync(fd) == 0;
  int saved = errno;
  close(fd);
  if (!ok || std::rename(tmp.c_str(), target.c_str()) != 0) {
    if (ok) saved = errno;
    fs::remove(tmp, ec);
    return fail(std::strerror(saved));
  }
  if (create) fs::remove(reservation_path(jobs, r.id), ec);
  return true;
}

std::vector<JobRecord> JobRegistry::list(Diagnostics& diags) const {
  std::vector<JobRecord> out;
  fs::path jobs = fs::path(dir_) / "jobs";
  std::error_code ec;
  if (!fs::is_directory(jobs, ec)) return out;
  for (const auto& entry : fs::directory_iterator(jobs, ec)) {
    const fs::path& p = entry.path();
    if (p.extension() != ".json" || p.filename().string()[0] == '.') continue;
    // A FIFO (or device) named like an entry would block `list` forever.
    if (!entry.is_regular_file(ec)) continue;
    std::ifstream in(p);
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json j = json_depth_within(text.str())
                           ? nlohmann::json::parse(text.str(), nullptr, false)
                           : nlohmann::json(nlohmann::json::value_t::discarded);
    std::optional<JobRecord> r = j.is_discarded() ? std::nullopt : job_record_from_json(j);
    if (!r) {
      diags.warning("registry-corrupt-entry", "", {},
                    fmt::format("skipping unreadable registry entry {}", p.string()),
                    "remove the file if it is not needed");
      continue;
    }
    out.push_back(std::move(*r));
  }
  std::sort(out.begin(), out.end(), [](const JobRecord& a, const JobRecord& b) {
    return std::tie(a.submitted_at, a.id) < std::tie(b.submitted_at, b.id);
  });
  return out;
}

std::optional<JobRecord> JobRegistry::find(const std::string& ref, Diagnostics& diags) const {
  std::vector<JobRecord> all = list(diags);
  std::vector<const JobRecord*> hits;
  for (const auto& r : all) {
    if (r.id == ref) return r;
    if (r.id.rfind(ref, 0) == 0 || r.scheduler_id == ref) hits.push_back(&r);
  }
  if (hits.size() == 1) return *hits[0];
  if (hits.empty()) {
    diags.error("unknown-job", "", {}, fmt::format("no job `{}` in the registry {}", ref, dir_),
                "`bridge-launch list` shows the recorded jobs");
  } else {
    std::string ids;
    for (const auto* h : hits) ids += " " + h->id;
    diags.error("ambiguous-job", "", {},
                fmt::format("`{}` matches {} jobs:{}", ref, hits.size(), ids),
                "give more characters of the id");
  }
  return std::nullopt;
}

std::string utc_timestamp_iso8601() {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03d}Z",
                     fmt::gmtime(std::chrono::system_clock::to_time_t(now)), ms.count());
}

std::string new_job_id(const std::string& name) {
  std::random_device rd;
  auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::string safe;
  for (char c : name) safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '-';
  // An id is typed as a command-line argument (`status ID`): one that starts with '-' would
  // be read as an option.
  if (safe.empty() || safe.front() == '-') safe = "job" + safe;
  return fmt::format("{}-{:%Y%m%d-%H%M%S}-{:04x}", safe, fmt::localtime(now), rd() & 0xffff);
}

}  // namespace bridge
