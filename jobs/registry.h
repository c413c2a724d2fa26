// JobRegistry: the local record of submitted jobs, one JSON file per job.
//
// Lives in <state root>/jobs (state_root() in system/host_env.h: $BRIDGE_LAUNCH_STATE_DIR,
// else $XDG_STATE_HOME/bridge-launch, else ~/.local/state/bridge-launch). Writes are atomic (temp
// file, fsync, rename) and serialized across processes by an exclusive flock on `<dir>/lock`, so
// concurrent bridge-launch processes never corrupt an entry. Reading tolerates damage: a corrupt or
// foreign file is reported as a warning and skipped. Records never hold secret values.
//
// Submission (docs/reliability.md, "Submission durability"): before the scheduler can take a
// job, its entry is written as a *pending* entry (create_pending: one JSON line, then
// reserved blank space), so that no kill of bridge-launch can lose it; flush_pending then
// fsyncs it (Slurm: while sbatch talks to the controller). Once the scheduler answered, the
// fields that changed (its id, the job dir, the state) are committed into that space with
// one pwrite (commit_pending): no new block, no rename, no fsync on the path after sbatch. A
// commit lost to a crash leaves the pending entry, which names the job (id, job dir,
// `--comment=bridge-launch:<id>`). Later writes (`put`) replace the whole entry with plain
// JSON again.
//
// The registry reads the time, waits for its lock, draws the random part of job ids and logs
// only through the seams it is built with (RegistrySeams, from launcher/services.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/diagnostics.h"
#include "jobs/job_record.h"
#include "system/clock.h"
#include "system/host_env.h"

namespace spdlog {
class logger;
}

namespace bridge {

// What the registry uses from the outside world: the clock (job ids, the age of stale
// reservations, how long a write waited for the lock), the sleeper (between lock attempts),
// the random source (job ids) and the logger (a lock held by another process).
struct RegistrySeams {
  const Clock& clock;
  Sleeper& sleeper;
  Random& random;
  spdlog::logger& log;
};

// A pending entry written by JobRegistry::create_pending, to be committed or dropped.
struct PendingEntry {
  std::string id;
  std::string path;  // <registry>/jobs/<id>.json
  // The pending record as written, without the fields a commit never changes (knobs, plan,
  // rendered submission: job_record_to_json's kChanging): commit writes what differs.
  nlohmann::ordered_json fields;
  uint64_t room_offset = 0;        // where the reserved blank space starts
  size_t room = 0;                 // its size; a commit that does not fit is appended instead
  uint64_t device = 0, inode = 0;  // the file written, so a commit never writes into another
  bool completed = false;     // the entry holds the record's knobs and plan (see flush_pending)
  bool flushed = false;       // flush_pending succeeded: the entry is on disk
  bool flush_failed = false;  // flush_pending failed (and said so); not tried again
};

// What JobRegistry::update_if_state did.
enum class UpdateResult {
  kWritten,     // the entry now holds the record
  kSuperseded,  // another process had changed the entry's state: nothing was written
  kFailed,      // the write failed (with the error)
};

// A reservation (`jobs/.<id>.reservation`) lives from reserve_id until the pending entry
// replaces it: a render and one write under the lock, bounded by the lock's timeout. One
// older than this was left by a launcher killed in between, for which nothing was submitted
// (the scheduler gets a job only after its pending entry exists); `list` removes it.
inline constexpr std::chrono::hours kStaleReservationAge{1};

class JobRegistry {
 public:
  // `lock_timeout`: how long a write waits for the registry lock before it gives up.
  JobRegistry(std::string dir, RegistrySeams seams,
              std::chrono::milliseconds lock_timeout = std::chrono::seconds(30))
      : dir_(std::move(dir)), seams_(seams), lock_timeout_(lock_timeout) {}
  static std::string default_dir(const HostEnvironment& env);

  const std::string& dir() const { return dir_; }
  // Picks a job id for `name` that no entry and no other reservation of this registry has,
  // and reserves it: under the registry lock, `jobs/.<id>.reservation` is created with
  // O_EXCL; a non-empty `sample` is written and fsynced into it. So ids are unique by
  // construction (two launches in the same second cannot share one). A launch passes no
  // sample: create_pending writes the entry itself into the reservation before anything is
  // submitted. nullopt (with `registry-unwritable`) if not.
  // `preferred` (a candidate_id) is tried first, so that a job rendered with it before
  // anything was created keeps its name; the caller compares the id it gets.
  std::optional<std::string> reserve_id(const std::string& name, const std::string& sample,
                                        Diagnostics& diags,
                                        const std::string& preferred = "") const;
  // An id reserve_id could pick for `name` now, not reserved: the launcher renders the job
  // with it before anything exists on disk (a job that fails to render leaves nothing).
  std::string candidate_id(const std::string& name) const;
  // Drops a reservation whose job was never accepted.
  void release_id(const std::string& id) const;
  // The entry of a job about to be submitted (r.id reserved by reserve_id): the record as one
  // JSON line plus reserved space is written into the reservation, then renamed (under the
  // lock) to `jobs/<id>.json`, which must not exist. When this returns the entry is in the
  // page cache under its name: a kill of this process at any later moment cannot lose it (a
  // crash of the machine can, until flush_pending). nullopt with `registry-unwritable`
  // ("nothing was submitted") when it cannot be written (a full disk or quota shows here:
  // at write() on a local file system, at close() on NFS, and both are checked).
  std::optional<PendingEntry> create_pending(const JobRecord& r, Diagnostics& diags) const;
  // Completes the pending entry and fsyncs it and its directory: the entry survives a crash
  // of the machine. The knobs and the plan, when create_pending did not have them yet
  // (r.plan_json was null: the CLI computes both while the submission command works, so the
  // entry is written sooner), are added as a line of their own. False (with
  // `registry-unwritable`) if the file system refused; the entry stays as written.
  bool flush_pending(PendingEntry& pending, const JobRecord& r, Diagnostics& diags) const;
  // The scheduler took the job: the top-level fields of `r` that differ from the pending
  // record are written as one JSON line into the reserved space (pwrite, no fsync: if a crash
  // loses it, the pending entry still names the job). The plan and the rendered submission
  // are written once (create_pending, flush_pending) and never committed. An entry not
  // flushed yet is flushed first, so a commit never reaches the disk before the entry it
  // belongs to (a flush that fails is reported, and the commit is still written). False
  // (with an error) if the commit is not written.
  bool commit_pending(PendingEntry& pending, const JobRecord& r, Diagnostics& diags) const;
  // The job was never accepted: its pending entry goes away.
  void drop_pending(const PendingEntry& pending) const;
  // Writes the entry for r.id. With `create`, the entry must not exist yet (an existing
  // entry is never overwritten by a new job) and the id's reservation is dropped. False
  // (with an error) when it cannot be written.
  bool put(const JobRecord& r, Diagnostics& diags, bool create = false) const;
  // A reader's write (status, --wait, logs): the entry is replaced by `r` unless another
  // process recorded a final state since the reader read it (`seen_state`: the state `r` was
  // based on), such as the job's own launcher recording how it ended. Then nothing is
  // written and `current` is the entry as it is now: a reader never overwrites what the job's
  // owner wrote after it read.
  UpdateResult update_if_state(const JobRecord& r, JobState seen_state, JobRecord& current,
                               Diagnostics& diags) const;
  // Every readable entry, oldest first; damaged files (and files larger than any entry)
  // become warnings, read no further than their size.
  std::vector<JobRecord> list(Diagnostics& diags) const;
  // By exact id, a recipe name (its latest job), a unique id prefix or a scheduler id;
  // errors name the ambiguity or suggest ids.
  std::optional<JobRecord> find(const std::string& ref, Diagnostics& diags) const;

 private:
  enum class WriteMode { kReplace, kCreate, kIfState };
  bool write_entry(const JobRecord& r, Diagnostics& diags, WriteMode mode, JobState seen_state,
                   JobRecord* current, bool* superseded = nullptr) const;
  std::string lock_error() const;
  // The one "cannot record job" error (put and commit_pending); always returns false.
  bool write_failed(const std::string& id, const std::string& what, Diagnostics& diags) const;
  std::string dir_;
  RegistrySeams seams_;
  std::chrono::milliseconds lock_timeout_;
};

// One entry's text as `list` reads it: a JSON record, or (a pending entry) a record on its
// first line followed by lines of committed fields; a damaged trailing line is ignored.
// nullopt when the text is no record of ours.
std::optional<JobRecord> read_job_entry(const std::string& text);

// A candidate job id: "<name>-<yyyymmdd-hhmmss>-<4 hex>" from the local time `now` and the low
// 16 of `random_bits` (reserve_id feeds it from its seams and makes the id unique, trying
// another candidate on a collision).
std::string new_job_id(const std::string& name, std::time_t now, uint32_t random_bits);
// "2026-11-30T20:15:02.123Z": `now` in UTC, to the millisecond (JobRecord::submitted_at).
std::string utc_timestamp_iso8601(std::chrono::system_clock::time_point now);

}  // namespace bridge
