// JobRecord and JobState: what the job registry stores about one submitted job, and the
// normalized states every executor maps its scheduler's states onto.
//
// A record never holds a secret value: `plan_json` is the redacted plan (secrets null) and
// `rendered` the submission text, which never contains secrets by construction.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace bridge {

enum class JobState { kPending, kRunning, kSucceeded, kFailed, kCancelled, kUnknown };
const char* job_state_name(JobState s);  // "PENDING", "RUNNING", "SUCCEEDED", ...
std::optional<JobState> parse_job_state(const std::string& name);
bool is_final(JobState s);

// The source tree a job was given (runtime.code): which code it ran.
struct ShippedCode {
  std::string mode;           // snapshot | mount
  std::string source;         // the tree on the submitting host
  std::string dir;            // where the job reads it on the host (the snapshot, or the tree)
  std::string commit;         // git HEAD; "" outside git
  std::optional<bool> dirty;  // uncommitted changes to tracked files; nullopt outside git
  std::string hash;           // "sha256:<hex>" of the snapshot; "" when mounted
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;
};

struct JobRecord {
  std::string id;            // bridge-launch's id: "<name>-<yyyymmdd-hhmmss>-<4 hex>"
  std::string name;          // recipe name
  std::string executor;      // local | slurm | kubernetes
  std::string scheduler_id;  // Slurm job id, Kubernetes object name, local launcher pid
  std::string job_dir;       // where scripts and per-rank logs live
  std::string recipe_path;
  std::vector<std::string> overrides;
  std::string submitted_at;  // ISO 8601, UTC
  JobState state = JobState::kPending;
  std::string state_detail;  // e.g. "rank 2 exited with code 17"
  std::optional<int> exit_code;
  std::string namespace_;  // kubernetes
  std::string context;     // kubernetes
  int nodes = 1;
  int ranks = 1;
  std::map<std::string, std::string> knobs;  // flattened recipe inputs, for `compare`
  nlohmann::ordered_json plan_json;          // redacted plan (plan --format json)
  std::string rendered;  // the rendered submission (script, manifests, commands)
  // When the job started and ended (ISO 8601, UTC), as the scheduler reported them (or, when
  // it reports none, when bridge-launch first saw it running / finished); "" = not yet.
  std::string started_at;
  std::string ended_at;
  // The rank whose log carries the iteration lines the live progress follows (-1: unknown,
  // an entry written by an older version; the progress reader then tries the last rank and 0).
  int progress_rank = -1;
  std::optional<ShippedCode> code;  // nullopt: the job got no runtime.code
};

// kAll: the whole record, as an entry holds it. kChanging: without the bulky fields that are
// fixed when the job is submitted and never change after (`knobs`, `plan`, `rendered`): what
// a commit of the scheduler's answer compares (copying the plan costs more than the rest of
// the record together).
enum class RecordFields { kAll, kChanging };
nlohmann::ordered_json job_record_to_json(const JobRecord& r,
                                          RecordFields fields = RecordFields::kAll);
// The `code` object of an entry and of `status --format json`.
nlohmann::ordered_json shipped_code_to_json(const ShippedCode& c);
// nullopt when `j` is not a record of ours (missing or mistyped fields).
std::optional<JobRecord> job_record_from_json(const nlohmann::json& j);

// The names of the env variables the job's recorded plan marks secret (their values are not
// recorded): a reader that shows scheduler output about the job scrubs the values these
// names have in its own environment (base/secret_scrub.h).
std::vector<std::string> secret_env_names(const JobRecord& r);

struct JobStatus {
  JobState state = JobState::kUnknown;
  std::string detail;  // the scheduler's own words, e.g. "FAILED (ExitCode=1:0)"
  std::optional<int> exit_code;
  // The scheduler's start/end times (ISO 8601, UTC) when it reports them, else "".
  std::string started_at;
  std::string ended_at;
  // The scheduler's id of a job whose record has none (bridge-launch stopped between the
  // scheduler accepting it and recording the id; found by its unique tag). "" otherwise.
  std::string scheduler_id;
  // Why a pending job waits, in the scheduler's words ("Resources", "Priority",
  // "0/2 nodes are available: ..."); "" when it gives none.
  std::string pending_reason;
};

}  // namespace bridge
