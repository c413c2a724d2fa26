#include "jobs/registry.h"

#include <fcntl.h>
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/json_limits.h"
#include "base/json_text.h"
#include "base/status.h"

namespace bridge {

namespace fs = std::filesystem;

namespace {

// Holds an exclusive flock on <dir>/lock for its lifetime. Another process holding the lock
// (a stuck bridge-launch, a `flock` by hand) must not block a launch silently: after a second
// it says that it waits, and after `timeout` it gives up (errno EWOULDBLOCK).
class DirLock {
 public:
  DirLock(const fs::path& dir, std::chrono::milliseconds timeout, const RegistrySeams& seams) {
    fd_ = open((dir / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0) return;
    auto start = seams.clock.steady_now();
    bool said = false;
    while (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      auto waited = seams.clock.steady_now() - start;
      if ((errno != EWOULDBLOCK && errno != EINTR) || waited > timeout) {
        int saved = errno;
        close(fd_);
        fd_ = -1;
        errno = saved;
        return;
      }
      if (!said && waited > std::chrono::seconds(1)) {
        seams.log.warn("waiting for the job registry lock {} (held by another process)",
                       (dir / "lock").string());
        said = true;
      }
      seams.sleeper.pause_for(std::chrono::milliseconds(20));
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

std::string JobRegistry::default_dir(const HostEnvironment& env) { return state_root(env); }

namespace {
fs::path reservation_path(const fs::path& jobs, const std::string& id) {
  return jobs / ("." + id + ".reservation");
}
}  // namespace

std::string JobRegistry::candidate_id(const std::string& name) const {
  return new_job_id(name, std::chrono::system_clock::to_time_t(seams_.clock.now()),
                    seams_.random.next());
}

std::optional<std::string> JobRegistry::reserve_id(const std::string& name,
                                                   const std::string& sample, Diagnostics& diags,
                                                   const std::string& preferred) const {
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
  DirLock lock(dir_, lock_timeout_, seams_);
  if (!lock.ok()) return fail(lock_error());
  for (int attempt = 0; attempt < 64; ++attempt) {
    std::string id = attempt == 0 && !preferred.empty() ? preferred : candidate_id(name);
    if (fs::exists(jobs / (id + ".json"), ec)) continue;
    fs::path reservation = reservation_path(jobs, id);
    int fd = open(reservation.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) return fail(std::strerror(errno));
    // A full disk shows only at fsync.
    bool ok = sample.empty() || (write_all(fd, sample) && fsync(fd) == 0);
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

bool JobRegistry::write_failed(const std::string& id, const std::string& what,
                               Diagnostics& diags) const {
  diags.error("registry-write", "", {},
              fmt::format("cannot record job {} in the registry {}: {}", id, dir_, what),
              "check that the directory is writable and the disk not full "
              "(set BRIDGE_LAUNCH_STATE_DIR or XDG_STATE_HOME to move it)");
  return false;
}

namespace {

// The largest entry file read back. An entry holds one plan and one rendered submission, a
// few hundred KiB for the largest jobs; anything far bigger is not ours, and reading it whole
// would stall `list` (a 3 GB file took 36 s and 6 GB of memory).
constexpr uintmax_t kMaxEntryBytes = 16u << 20;

// The entry at `path`, or why it is not a readable entry of ours.
StatusOr<JobRecord> read_entry_file(const fs::path& path) {
  std::error_code ec;
  uintmax_t size = fs::file_size(path, ec);
  if (ec) return Status::failed(ec.message());
  if (size > kMaxEntryBytes)
    return Status::failed(
        fmt::format("{} bytes, more than any entry ({} MiB)", size, kMaxEntryBytes >> 20));
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  text.resize(static_cast<size_t>(in.gcount()));
  std::optional<JobRecord> r = read_job_entry(text);
  if (!r) return Status::failed("not a bridge-launch job record");
  return std::move(*r);
}

}  // namespace

bool JobRegistry::put(const JobRecord& r, Diagnostics& diags, bool create) const {
  return write_entry(r, diags, create ? WriteMode::kCreate : WriteMode::kReplace, {}, nullptr);
}

UpdateResult JobRegistry::update_if_state(const JobRecord& r, JobState seen_state,
                                          JobRecord& current, Diagnostics& diags) const {
  bool superseded = false;
  if (!write_entry(r, diags, WriteMode::kIfState, seen_state, &current, &superseded))
    return UpdateResult::kFailed;
  return superseded ? UpdateResult::kSuperseded : UpdateResult::kWritten;
}

bool JobRegistry::write_entry(const JobRecord& r, Diagnostics& diags, WriteMode mode,
                              JobState seen_state, JobRecord* current, bool* superseded) const {
  fs::path jobs = fs::path(dir_) / "jobs";
  std::error_code ec;
  fs::create_directories(jobs, ec);
  auto fail = [&](const std::string& what) { return write_failed(r.id, what, diags); };
  if (ec) return fail(ec.message());
  if (!valid_id(r.id)) return fail("invalid job id");
  DirLock lock(dir_, lock_timeout_, seams_);
  if (!lock.ok()) return fail(lock_error());
  fs::path target = jobs / (r.id + ".json");
  // Under the lock, so no other bridge-launch can create the entry in between.
  if (mode == WriteMode::kCreate && fs::exists(target, ec))
    return fail("an entry with this id exists already; entries are never overwritten");
  if (mode == WriteMode::kIfState) {
    // Also under the lock: the entry as it is now, which another process (the job's owner
    // writing the final state) may have changed since this one read it.
    StatusOr<JobRecord> now = read_entry_file(target);
    // Only a final state recorded since stands against the reader: a reader that is behind
    // on a live job (--wait still at PENDING while `status` recorded RUNNING) must still be
    // able to record how the job ended.
    if (now.ok() && now->state != seen_state && is_final(now->state)) {
      *current = std::move(now).value();
      *superseded = true;
      return true;
    }
  }
  fs::path tmp = jobs / fmt::format(".{}.{}.tmp", r.id, getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return fail(std::strerror(errno));
  std::string text = json_text(job_record_to_json(r), 2) + "\n";
  bool ok = write_all(fd, text) && fsync(fd) == 0;
  int saved = errno;
  close(fd);
  if (!ok || std::rename(tmp.c_str(), target.c_str()) != 0) {
    if (ok) saved = errno;
    fs::remove(tmp, ec);
    return fail(std::strerror(saved));
  }
  if (mode == WriteMode::kCreate) fs::remove(reservation_path(jobs, r.id), ec);
  return true;
}

namespace {

// Room for the fields a commit writes (scheduler id, job dir, state, ...): a job dir may be a
// long path, so a page and a half.
constexpr size_t kCommitRoom = 6144;

// json_text: nlohmann's text at a fraction of the cost (a submission writes 40 KB beside sbatch).
std::string compact_json(const nlohmann::ordered_json& j) { return json_text(j) + "\n"; }

bool same_file(const std::string& path, uint64_t device, uint64_t inode) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_dev) == device &&
         static_cast<uint64_t>(st.st_ino) == inode;
}

}  // namespace

std::optional<PendingEntry> JobRegistry::create_pending(const JobRecord& r,
                                                        Diagnostics& diags) const {
  fs::path jobs = fs::path(dir_) / "jobs";
  auto fail = [&](const std::string& why) -> std::optional<PendingEntry> {
    diags.error(
        "registry-unwritable", "", {},
        fmt::format("the job registry {} is not writable ({}); nothing was submitted", dir_, why),
        "fix the permissions or free space, or set BRIDGE_LAUNCH_STATE_DIR");
    return std::nullopt;
  };
  if (!valid_id(r.id)) return fail("invalid job id");
  PendingEntry p;
  p.id = r.id;
  p.path = (jobs / (r.id + ".json")).string();
  std::string text = compact_json(job_record_to_json(r));
  p.fields = job_record_to_json(r, RecordFields::kChanging);
  p.completed = !r.plan_json.is_null();
  p.room_offset = text.size();
  p.room = kCommitRoom;
  text += std::string(p.room - 1, ' ') + "\n";
  fs::path reservation = reservation_path(jobs, r.id);
  // reserve_id created the reservation: writing into it (not creating a file) keeps the id's
  // uniqueness, and the entry appears under its name only once it is complete.
  int fd = open(reservation.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return fail(std::strerror(errno));
  struct stat st {};
  bool ok = write_all(fd, text) && fstat(fd, &st) == 0;
  int saved = errno;
  if (ok) {
    DirLock lock(dir_, lock_timeout_, seams_);
    std::error_code ec;
    if (!lock.ok()) {
      std::string why = lock_error();
      close(fd);
      fs::remove(reservation, ec);
      return fail(why);
    }
    if (fs::exists(p.path, ec)) {
      close(fd);
      fs::remove(reservation, ec);
      return fail("an entry with this id exists already; entries are never overwritten");
    }
    ok = std::rename(reservation.c_str(), p.path.c_str()) == 0;
    saved = errno;
  }
  // A network file system (NFS, the usual home of ~/.local/state on a cluster) writes the
  // data back at close and reports a full disk or quota there, not at write().
  if (close(fd) != 0 && ok) {
    ok = false;
    saved = errno;
  }
  if (!ok) {
    std::error_code ec;
    fs::remove(reservation, ec);
    if (same_file(p.path, st.st_dev, st.st_ino)) fs::remove(p.path, ec);
    return fail(std::strerror(saved));
  }
  p.device = static_cast<uint64_t>(st.st_dev);
  p.inode = static_cast<uint64_t>(st.st_ino);
  return p;
}

bool JobRegistry::flush_pending(PendingEntry& pending, const JobRecord& r,
                                Diagnostics& diags) const {
  if (pending.flushed) return true;
  auto fail = [&](const std::string& why) {
    pending.flush_failed = true;
    diags.error("registry-unwritable", "", {},
                fmt::format("the entry of job {} could not be completed and flushed to disk in "
                            "the job registry {} ({})",
                            pending.id, dir_, why),
                "fix the file system under the registry, or set BRIDGE_LAUNCH_STATE_DIR");
    return false;
  };
  int fd = open(pending.path.c_str(), O_WRONLY | O_CLOEXEC);
  struct stat st {};
  // A file replaced meanwhile (put) holds the whole record and was fsynced by its writer.
  bool ours = fd >= 0 && fstat(fd, &st) == 0 &&
              static_cast<uint64_t>(st.st_dev) == pending.device &&
              static_cast<uint64_t>(st.st_ino) == pending.inode;
  if (fd < 0 && errno != ENOENT) return fail(std::strerror(errno));
  bool ok = true;
  int saved = 0;
  if (ours && !pending.completed && !r.plan_json.is_null()) {
    // {"knobs":...,"plan":...} written around the plan's own text: a copy of the plan's tree
    // into a new object would cost as much as writing it.
    std::string late = "{\"knobs\":" + json_text(nlohmann::ordered_json(r.knobs)) +
                       ",\"plan\":" + json_text(r.plan_json) + "}\n";
    // No registry lock: only this process appends to its entry's file, and a file another
    // bridge-launch replaced meanwhile (`put`, which renames a new file over it) is no longer
    // the entry, so a line appended to it is harmless. (The lock could also hold sbatch's
    // answer back for up to its 30 s timeout.)
    ok = lseek(fd, 0, SEEK_END) >= 0 && write_all(fd, late);
    saved = errno;
    pending.completed = ok;
  }
  // The file, then its directory (the rename): fsync works on the inode, so this descriptor
  // is as good as the one that wrote the entry.
  if (ok && ours && fsync(fd) != 0) {
    ok = false;
    saved = errno;
  }
  if (fd >= 0) close(fd);
  if (ok) {
    int dir_fd = open((fs::path(dir_) / "jobs").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0 && fsync(dir_fd) != 0 && errno != EINVAL) {
      ok = false;
      saved = errno;
    }
    if (dir_fd >= 0) close(dir_fd);
  }
  if (!ok) return fail(std::strerror(saved));
  pending.flushed = true;
  return true;
}

bool JobRegistry::commit_pending(PendingEntry& pending, const JobRecord& r,
                                 Diagnostics& diags) const {
  auto fail = [&](const std::string& what) { return write_failed(r.id, what, diags); };
  // A commit never reaches the disk before the entry it belongs to. A flush that fails here
  // is a warning: the scheduler has the job, and the commit still goes into the reserved
  // space (no new block needed).
  if (!pending.flushed && !pending.flush_failed) {
    Diagnostics flush_diags;
    if (!flush_pending(pending, r, flush_diags)) diags.add_as_warnings(flush_diags);
  }
  nlohmann::ordered_json now = job_record_to_json(r, RecordFields::kChanging);
  nlohmann::ordered_json changed = nlohmann::ordered_json::object();
  for (const auto& [key, value] : now.items()) {
    auto it = pending.fields.find(key);
    if (it == pending.fields.end() || *it != value) changed[key] = value;
  }
  if (changed.empty()) return true;
  std::string line = compact_json(changed);
  bool ok = false;
  int saved = 0;
  {
    DirLock lock(dir_, lock_timeout_, seams_);
    if (!lock.ok()) return fail(lock_error());
    // Another bridge-launch may have replaced the entry meanwhile (put): then the whole
    // record is written the ordinary way below, never into a file that is no longer ours.
    if (same_file(pending.path, pending.device, pending.inode)) {
      int fd = open(pending.path.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) return fail(std::strerror(errno));
      if (line.size() < pending.room) {  // the reserved blanks: no new block, no "disk full"
        ok = pwrite(fd, line.data(), line.size(), static_cast<off_t>(pending.room_offset)) ==
             static_cast<ssize_t>(line.size());
        if (ok) {
          pending.room_offset += line.size();
          pending.room -= line.size();
        }
      } else {
        ok = lseek(fd, 0, SEEK_END) >= 0 && write_all(fd, line);
      }
      saved = errno;
      close(fd);
      if (!ok) return fail(std::strerror(saved));
    }
  }
  if (!ok) return put(r, diags);
  for (const auto& [key, value] : changed.items()) pending.fields[key] = value;
  return true;
}

void JobRegistry::drop_pending(const PendingEntry& pending) const {
  DirLock lock(dir_, lock_timeout_, seams_);
  std::error_code ec;
  if (lock.ok() && same_file(pending.path, pending.device, pending.inode))
    fs::remove(pending.path, ec);
}

std::optional<JobRecord> read_job_entry(const std::string& text) {
  auto parse = [](std::string_view t) {
    return json_depth_within(t) ? nlohmann::json::parse(t, nullptr, false)
                                : nlohmann::json(nlohmann::json::value_t::discarded);
  };
  // A pending entry: the record on one line, then committed fields, one JSON object a line.
  size_t eol = text.find('\n');
  bool lines = eol != std::string::npos && eol > 1 && text.front() == '{' && text[eol - 1] == '}' &&
               text.find_first_not_of(" \t\r\n", eol) != std::string::npos;
  nlohmann::json j = parse(lines ? std::string_view(text).substr(0, eol) : text);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  for (size_t pos = eol; lines && pos < text.size();) {
    size_t end = text.find('\n', pos + 1);
    std::string_view line = std::string_view(text).substr(
        pos + 1, end == std::string::npos ? std::string::npos : end - pos - 1);
    pos = end == std::string::npos ? text.size() : end;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    nlohmann::json update = parse(line);
    if (update.is_discarded() || !update.is_object()) break;  // a commit cut by a crash
    for (const auto& [key, value] : update.items()) j[key] = value;
  }
  return job_record_from_json(j);
}

namespace {
// A reservation left by a killed launcher (kStaleReservationAge). Without the registry lock:
// a launcher stuck that long that then writes its entry finds the reservation gone and
// submits nothing (create_pending opens it without O_CREAT).
void remove_if_stale(const fs::directory_entry& entry, fs::file_time_type stale_before) {
  std::error_code ec;
  if (!entry.is_regular_file(ec) || entry.last_write_time(ec) >= stale_before || ec) return;
  fs::remove(entry.path(), ec);
}
}  // namespace

std::vector<JobRecord> JobRegistry::list(Diagnostics& diags) const {
  std::vector<JobRecord> out;
  fs::path jobs = fs::path(dir_) / "jobs";
  std::error_code ec;
  if (!fs::is_directory(jobs, ec)) return out;
  auto stale_before = std::chrono::file_clock::from_sys(seams_.clock.now()) - kStaleReservationAge;
  for (const auto& entry : fs::directory_iterator(jobs, ec)) {
    const fs::path& p = entry.path();
    if (p.extension() == ".reservation" && p.filename().string()[0] == '.') {
      remove_if_stale(entry, stale_before);
      continue;
    }
    if (p.extension() != ".json" || p.filename().string()[0] == '.') continue;
    // A FIFO (or device) named like an entry would block `list` forever.
    if (!entry.is_regular_file(ec)) continue;
    StatusOr<JobRecord> r = read_entry_file(p);
    if (!r.ok()) {
      diags.warning("registry-corrupt-entry", "", {},
                    fmt::format("skipping unreadable registry entry {} ({})", p.string(), r.why()),
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
  const JobRecord* latest_named = nullptr;  // a recipe name stands for its latest job
  for (const auto& r : all) {
    if (r.id == ref) return r;
    if (r.id.rfind(ref, 0) == 0 || r.scheduler_id == ref) hits.push_back(&r);
    if (r.name == ref && (!latest_named || r.submitted_at > latest_named->submitted_at))
      latest_named = &r;  // ISO 8601 UTC times sort as text
  }
  if (latest_named) return *latest_named;
  if (hits.size() == 1) return *hits[0];
  if (hits.empty()) {
    diags.error("unknown-job", "", {}, fmt::format("no job `{}` in the registry {}", ref, dir_),
                "`bridge-launch list` shows the recorded jobs");
  } else {
    std::string ids;
    for (const auto* h : hits) ids += " " + h->id;
    diags.error("ambiguous-job", "", {},
                fmt::format("`{}` matches {} jobs:{}", ref, hits.size(), ids),
                "give more characters of the id, or the recipe name for its latest job");
  }
  return std::nullopt;
}

std::string utc_timestamp_iso8601(std::chrono::system_clock::time_point now) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03d}Z",
                     fmt::gmtime(std::chrono::system_clock::to_time_t(now)), ms.count());
}

std::string new_job_id(const std::string& name, std::time_t now, uint32_t random_bits) {
  std::string safe;
  for (char c : name) safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '-';
  // An id is typed as a command-line argument (`status ID`): one that starts with '-' would
  // be read as an option.
  if (safe.empty() || safe.front() == '-') safe = "job" + safe;
  return fmt::format("{}-{:%Y%m%d-%H%M%S}-{:04x}", safe, fmt::localtime(now),
                     random_bits & 0xffffu);
}

}  // namespace bridge
