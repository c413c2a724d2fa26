#include "executors/slurm_executor.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "base/exit_codes.h"
#include "base/numbers.h"
#include "base/secret_scrub.h"
#include "base/yaml_tree.h"
#include "executors/job_dir.h"
#include "executors/rank_logs.h"
#include "executors/slurm_retry.h"
#include "executors/slurm_scheduler.h"
#include "executors/slurm_script.h"
#include "jobs/job_watchdog.h"
#include "plan/plan_confirm.h"
#include "system/log_tail.h"

namespace bridge {

namespace {

namespace fs = std::filesystem;

constexpr auto kPollInterval = std::chrono::milliseconds(1000);
constexpr int kMaxStatusFailures = 5;  // consecutive failed status queries while following
// Failing units whose logs the summary of `status JOB` reads (srun reports the ranks stopped
// after a failure too; the first reported ones hold the cause).
constexpr size_t kSummaryUnits = 16;

// Slurm ids are digits, with `_N` for an array task. The id comes from a file the user can
// edit: `--user=root` there must never become an option of a Slurm command.
bool is_slurm_job_id(const std::string& id) {
  return !id.empty() && id.front() != '_' && std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= '0' && c <= '9') || c == '_';
  });
}

std::string join_ids(const std::vector<std::string>& ids) {
  return fmt::format("{}", fmt::join(ids, ","));
}

std::string help_for(const std::string& message) {
  if (message.find("Unable to contact slurm controller") != std::string::npos)
    return "the Slurm controller is not answering: check `scontrol ping` (on the local test "
           "cluster: scripts/slurm-test-cluster.sh up)";
  if (message.find("account") != std::string::npos)
    return "check executor.slurm.account and executor.slurm.partition (`sacctmgr show assoc "
           "user=$USER`)";
  if (message.find("partition") != std::string::npos)
    return "check executor.slurm.partition (`sinfo -s` lists the partitions)";
  if (message.find("command not found") != std::string::npos ||
      message.find("could not run") != std::string::npos)
    return "run bridge-launch on a Slurm login node, or put the Slurm client commands on PATH";
  return {};
}

// Directories that create_directories(dir) would create, outermost first.
std::vector<fs::path> missing_dirs(const fs::path& dir) {
  std::vector<fs::path> missing;
  std::error_code ec;
  for (fs::path p = dir; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    missing.insert(missing.begin(), p);
    if (p == p.parent_path()) break;
  }
  return missing;
}

void remove_if_empty(const std::vector<fs::path>& created) {
  std::error_code ec;
  for (auto it = created.rbegin(); it != created.rend(); ++it)
    if (fs::is_directory(*it, ec) && fs::is_empty(*it, ec)) fs::remove(*it, ec);
}

int number_in(const std::string& filename, const std::string& prefix) {
  // "rank12.log" -> 12; -1 when it does not match.
  if (filename.rfind(prefix, 0) != 0 || filename.size() <= prefix.size() + 4) return -1;
  std::string digits = filename.substr(prefix.size(), filename.size() - prefix.size() - 4);
  if (filename.substr(filename.size() - 4) != ".log" || digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return parse_decimal<int>(digits).value_or(-1);
}

// sbatch's own output file (--output/--error, `slurm-<id><suffix>`): in the submission's
// directory. Records of older versions, whose job dir is named after the Slurm id, kept it
// one level up; only those look there (a new job given a reused id must not read an old
// job's file).
std::optional<fs::path> batch_file(const JobRecord& job, const char* suffix) {
  std::string name = fmt::format("slurm-{}{}", job.scheduler_id, suffix);
  fs::path dir(job.job_dir);
  std::error_code ec;
  if (fs::exists(dir / name, ec)) return dir / name;
  if (dir.filename() == job.scheduler_id && fs::exists(dir.parent_path() / name, ec))
    return dir.parent_path() / name;
  return std::nullopt;
}

// The files of `job` that `query` selects: one rank's (or its node's, under torchrun), one
// node's, or all of them with the batch output. Labels carry the node's host once the batch
// script has written the `hosts` file.
std::vector<LogTail> discover_logs(const JobRecord& job, const LogQuery& query) {
  fs::path dir(job.job_dir);
  std::error_code ec;
  std::map<int, fs::path> ranks, nodes;
  if (fs::is_directory(dir, ec)) {
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      std::string f = e.path().filename().string();
      if (int n = number_in(f, "rank"); n >= 0) ranks[n] = e.path();
      if (int n = number_in(f, "node"); n >= 0) nodes[n] = e.path();
    }
  }
  std::vector<std::string> hosts = job_dir_hosts(job.job_dir);
  auto label = [&](const char* kind, int n, int node) {
    bool known = node >= 0 && node < static_cast<int>(hosts.size()) && !hosts[node].empty();
    return known ? fmt::format("{} {} {}", kind, n, hosts[node]) : fmt::format("{} {}", kind, n);
  };
  const int per_node = ranks_per_node(job);
  std::vector<LogTail> out;
  if (query.rank) {
    int node = *query.rank / per_node;
    if (nodes.empty() || ranks.count(*query.rank))
      out.emplace_back(label("rank", *query.rank, node),
                       dir / fmt::format("rank{}.log", *query.rank));
    else
      out.emplace_back(label("node", node, node), dir / fmt::format("node{}.log", node));
    return out;
  }
  for (auto& [n, p] : ranks)
    if (!query.node || n / per_node == *query.node)
      out.emplace_back(label("rank", n, n / per_node), p);
  for (auto& [n, p] : nodes)
    if (!query.node || n == *query.node) out.emplace_back(label("node", n, n), p);
  if (query.node) return out;
  for (auto [suffix, name] : {std::pair{".out", "batch"}, std::pair{".err", "batch stderr"}})
    if (auto p = batch_file(job, suffix)) out.emplace_back(name, *p);
  return out;
}

// Whether the batch script wrote `line` where an attempt begins: its "attempt K starts" line,
// or the "requeueing job" line that ends the attempt before a requeue. The "attempt K failed"
// line is no boundary: the script writes it after srun's task reports of that attempt.
bool begins_an_attempt(const std::string& line) {
  if (line.rfind("bridge-launch: ", 0) != 0) return false;
  if (line.find("; requeueing job ") != std::string::npos) return true;
  constexpr std::string_view kAttempt = "bridge-launch: attempt ";
  if (line.rfind(kAttempt, 0) != 0) return false;
  size_t digits = line.find_first_not_of("0123456789", kAttempt.size());
  return digits > kAttempt.size() && line.compare(digits, std::string::npos, " starts") == 0;
}

// The batch stderr's last lines of the last attempt: srun's task reports and slurmstepd's
// messages are there. A requeued job appends every attempt to the same file, so what comes
// before the last attempt's beginning belongs to earlier ones. The script's own "attempt K
// failed (SIGNATURE on HOST)" summary is left out: it is no evidence, and its signature's
// name ("segfault") would read as a job-level cause.
std::vector<std::string> batch_stderr_lines(const JobRecord& job) {
  auto err = batch_file(job, ".err");
  size_t first_line = 0;
  std::vector<std::string> lines =
      err ? read_last_lines(*err, 4000, 1 << 20, first_line) : std::vector<std::string>{};
  for (size_t i = lines.size(); i > 0; --i)
    if (begins_an_attempt(lines[i - 1])) {
      lines.erase(lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  std::erase_if(
      lines, [](const std::string& line) { return line.rfind("bridge-launch: attempt ", 0) == 0; });
  return lines;
}

// srun's own account of the first failing task, from the batch stderr file:
// "srun: error: node1: task 3: Exited with exit code 17" -> "rank 3 exited with code 17".
// Under torchrun a task is a node. Adds it to `st` (detail, exit code) when found.
void add_failing_task(const JobRecord& job, JobStatus& st) {
  std::error_code ec;
  bool per_node = fs::exists(fs::path(job.job_dir) / "node0.log", ec);
  // srun reports tasks that ended alike in one line, and not in time order; a task reported
  // on its own ("task 3: Exited with exit code 17") is the likelier cause than a group.
  const SrunTaskReport* chosen = nullptr;
  auto reports = parse_srun_task_reports(batch_stderr_lines(job));
  for (const auto& r : reports) {
    if (r.text == "Terminated" || r.tasks.empty()) continue;  // stopped because another failed
    if (!chosen || (r.tasks.size() == 1 && chosen->tasks.size() > 1)) chosen = &r;
  }
  if (!chosen) return;
  std::string what = printable_text(chosen->text, 200);
  if (chosen->exit_code) {
    st.exit_code = *chosen->exit_code;
    what = fmt::format("exited with code {}", *chosen->exit_code);
  }
  st.detail += fmt::format("; {} {} {}", per_node ? "node" : "rank", chosen->tasks.front(), what);
}

// A job retried after a failure (executors/slurm_retry.h) runs as one Slurm job per attempt;
// its registry entry keeps the first one's id. `started`: the id of the newest attempt that
// started (whose files the job dir holds: logs, `why`); else the newest one submitted (its
// state is the job's: status, cancel).
JobRecord on_attempt(const JobRecord& job, const std::vector<SlurmAttempt>& attempts,
                     bool started) {
  JobRecord r = job;
  std::string id = started ? started_slurm_job(attempts) : latest_slurm_job(attempts);
  if (!id.empty()) r.scheduler_id = id;
  return r;
}

JobRecord on_attempt(const JobRecord& job, bool started) {
  return job.job_dir.empty() ? job : on_attempt(job, read_slurm_attempts(job.job_dir), started);
}

// After a retry, what `status` says is the attempt and why it was made, rather than Slurm's
// raw reason (a fresh job's "Resources", or the id of a job the user never submitted).
void describe_attempts(const std::vector<SlurmAttempt>& attempts, JobStatus& st) {
  if (attempts.empty()) return;
  const SlurmAttempt& last = attempts.back();
  std::string head = attempt_headline(attempts);
  if (!head.empty()) {
    const SlurmAttempt& before = attempts[attempts.size() - 2];
    if (st.state == JobState::kPending) {
      if (!before.ended_at.empty()) head += ", eligible at " + before.ended_at;
      st.pending_reason = head;
      st.detail = head;
    } else {
      st.detail = head + "; " + st.detail;
    }
  }
  if (last.ended && last.next_slurm_job.empty() && !last.not_retried.empty())
    st.detail += "; not retried: " + last.not_retried;
}

class SlurmExecutor : public Executor {
 public:
  SlurmExecutor(const ExecutorServices& services, SlurmRetryPolicy policy)
      : services_(services),
        slurm_(services.runner, services.sleeper, services.log, policy),
        policy_(policy) {}

  // The identity names the job's directory (<job_dir>/<id>/) and tags the job (--comment), to
  // find a job that a lost answer did create.
  std::unique_ptr<PreparedJob> render(const Plan& plan, const SubmissionIdentity& identity,
                                      Diagnostics& diags) const override {
    SlurmRenderOptions options;
    options.probe_dir = services_.probe_dir;
    options.submission_id = identity.job_id;
    auto script = render_sbatch_script(plan, options, diags);
    if (!script) return nullptr;
    std::string text = script->text;
    return std::make_unique<BoundJob>(
        std::move(text),
        [this, &plan, identity, sbatch = std::move(script->text)](
            const SubmitOptions& so, std::ostream&, Diagnostics& submit_diags,
            const OnAccepted& accepted) {
          return submit_script(plan, identity, sbatch, so, submit_diags, accepted);
        },
        /*calls_before_submit=*/true);
  }

  // sbatch takes everything that depends on the plan from its script (the registry id is its
  // `#SBATCH --comment`), so the sbatch of a submission can start before the plan exists.
  void prepare_to_submit() override {
    if (!ready_sbatch_) ready_sbatch_ = services_.runner.start(sbatch_spec({}));
  }

  // Never waits: with --wait the CLI follows the job through status() (the same for every
  // scheduler), so stdout keeps only what the CLI prints (the job id).
  //
  // sbatch is started before `before_submit` (the CLI's pending registry entry), usually
  // even before planning (prepare_to_submit), and gets its script on stdin only after that
  // returned: sbatch cannot submit before it read the script, so the entry is written first
  // (no kill of bridge-launch can lose it then), and planning and writing the entry overlap
  // sbatch's own start-up (loading libslurm, reading slurm.conf: about half of its time). A
  // false return kills the sbatch that never got a script. The entry's fsync
  // (`while_submitting`) runs once sbatch has the whole script, while sbatch gets its
  // credential and talks to the controller; `on_accepted` (the commit) runs once sbatch's id
  // line arrived, while sbatch exits.
  SubmitResult submit_script(const Plan& plan, const SubmissionIdentity& identity,
                             const std::string& script, const SubmitOptions& so, Diagnostics& diags,
                             const OnAccepted& on_accepted) const {
    SubmitResult result;
    result.exit_code = kExitRuntime;
    std::map<std::string, std::string> secrets;
    std::vector<std::string> secret_values;
    for (const auto& v : plan.env.vars)
      if (v.secret) {
        secrets[v.name] = v.value;
        secret_values.push_back(v.value);
      }
    // sbatch's words as shown: a wrapper or an sbatch that echoes its environment (which
    // holds the secrets) shows none of them (base/secret_scrub.h).
    auto said = [&](const CommandResult& answer) {
      CommandResult shown = answer;
      shown.out = scrub_secrets(shown.out, secret_values);
      shown.err = scrub_secrets(shown.err, secret_values);
      return slurm_error_text("sbatch", shown);
    };

    // sbatch opens slurm-<id>.out/.err in the submission's directory before the script runs.
    // A directory of this user's, created new (executors/job_dir.h): the job dir is shared.
    std::string files_dir = slurm_submission_dir(plan, identity.job_id);
    std::vector<fs::path> created = missing_dirs(files_dir);
    StatusOr<std::string> made =
        make_own_job_dir(plan.job_dir, fs::path(files_dir).filename().string());
    if (!made.ok()) {
      ready_sbatch_.reset();  // the early sbatch is killed before it got a script
      remove_if_empty(created);
      diags.error("slurm-job-dir", "executor.slurm.job_dir", plan.job.executor.slurm.job_dir.loc,
                  "cannot create the submission's directory: " + made.why(),
                  "set executor.slurm.job_dir to a writable directory of your own on the shared "
                  "file system");
      return result;
    }

    // The plan confirmation's program and request, which every rank's runtime starts through;
    // removed again with the directory when Slurm does not take the job.
    const auto job_files = plan_confirmation_files(plan);
    auto unmake_dir = [&]() {
      std::error_code ec;
      for (const auto& file : job_files) fs::remove(fs::path(files_dir) / file.first, ec);
      remove_if_empty(created);
    };
    if (Status wrote = write_job_files(files_dir, job_files); !wrote.ok()) {
      ready_sbatch_.reset();
      unmake_dir();
      diags.error("slurm-job-dir", "executor.slurm.job_dir", plan.job.executor.slurm.job_dir.loc,
                  wrote.why(), "check that the job dir is writable and has free space");
      return result;
    }

    std::string name = slurm_job_name(*plan.job.name.value);
    // The registry id is unique by construction (JobRegistry::reserve_id), so it tells our
    // job apart from any other of the same name.
    std::string comment = "bridge-launch:" + identity.job_id;
    // A user template that leaves out the directives gets the comment on the command line
    // (which wins over the script), and a fresh sbatch to carry it.
    bool tagged_by_script = script_sets_comment(script, comment);
    CommandSpec spec = sbatch_spec(secrets);
    if (!tagged_by_script) spec.argv.push_back("--comment=" + comment);
    spec.stdin_text = script;
    std::optional<std::string> id;
    // Before retrying a transient failure: did the "failed" try create the job after all?
    auto settled = [&]() {
      id = find_by_comment(name, comment);
      if (id) services_.log.warn("sbatch reported an error, but job {} was created; using it", *id);
      return id.has_value();
    };
    // An id on stdout is an accepted job, also when sbatch then exits non-zero.
    bool announced = false;
    auto accept = [&]() {
      result.exit_code = kExitOk;
      result.accepted = true;
      result.scheduler_id = *id;
      result.job_dir = files_dir;
      result.final_state = JobState::kPending;
      result.state_detail = "submitted";
      announced = true;
      if (on_accepted) on_accepted(result);
    };
    WhileRunning while_running;
    while_running.input_given = so.while_submitting;
    // sbatch --parsable prints the id and then tears down (about half a millisecond): the job
    // is recorded and announced meanwhile, not after sbatch's exit. A line before it (a
    // site's wrapper may print one) is passed over, as parse_sbatch_id does.
    while_running.until_line = [&](const std::string& line) {
      id = parse_sbatch_id(line);
      if (id) accept();
      return id.has_value();
    };
    // A launch that ends with this submission ends once the job is recorded: sbatch's
    // teardown after its id (its stdio is flushed at exit, so nothing follows the id) is not
    // waited for. With --wait, or more submissions to come (ablate), sbatch's exit is.
    while_running.leave_when_found = so.ends_after;
    std::unique_ptr<StartedCommand> sbatch = take_ready_sbatch(secrets, tagged_by_script);
    if (!sbatch) sbatch = services_.runner.start(spec);
    if (so.before_submit && !so.before_submit()) {
      sbatch.reset();  // killed before it read a script: nothing was submitted
      unmake_dir();
      return result;
    }
    CommandResult r = sbatch->finish(script, while_running);
    sbatch.reset();
    // A transient failure is retried as SlurmClient::run retries (its first try was this one).
    if (!r.ok() && r.started && !r.timed_out && policy_.attempts > 1 &&
        is_transient_slurm_error(r.err + r.out) && !parse_sbatch_id(r.out)) {
      services_.log.warn("sbatch: {}; retrying in {} ms (attempt 2 of {})", said(r),
                         policy_.first_backoff.count(), policy_.attempts);
      services_.sleeper.pause_for(policy_.first_backoff);
      if (!settled()) {
        SlurmRetryPolicy rest = policy_;
        rest.attempts -= 1;
        rest.first_backoff *= 2;
        r = SlurmClient(services_.runner, services_.sleeper, services_.log, rest)
                .run(spec, nullptr, settled);
      }
    }
    if (!id) id = parse_sbatch_id(r.out);
    if (id && !r.ok())
      services_.log.warn(
          "sbatch exited with code {} after printing job id {}; the job was accepted", r.exit_code,
          *id);
    // An sbatch that was killed (the runner's own timeout, or a signal) may have created the
    // job all the same (the controller answered late): look for it by its unique comment
    // before deleting anything. A definite refusal (controller down, bad option) needs none.
    if (!id && (r.timed_out || r.exit_code > 128)) settled();
    if (!id) {
      unmake_dir();
      std::string message =
          r.ok() ? fmt::format("sbatch printed no job id: `{}`",
                               printable_text(scrub_secrets(r.out, secret_values), 500))
                 : said(r);
      diags.error("slurm-submit-failed", "", {},
                  fmt::format("Slurm did not accept job `{}`:\n    {}", name, message),
                  help_for(message));
      return result;
    }
    if (!announced) accept();
    services_.log.info("Slurm job {} (`{}`, {} node(s) x {} GPU(s)): files in {}", *id, name,
                       plan.topology->nodes, plan.topology->gpus_per_node, result.job_dir);
    return result;
  }

  std::vector<JobStatus> status(const std::vector<JobRecord>& jobs,
                                Diagnostics& diags) const override {
    // An entry without an id: bridge-launch stopped between sbatch accepting the job and
    // recording its id. The job carries its registry id as --comment; adopt the id it has.
    std::map<std::string, std::string> adopted;  // registry id -> Slurm id
    for (const auto& j : jobs)
      if (j.scheduler_id.empty() && !j.name.empty())
        if (auto id = find_by_comment(slurm_job_name(j.name), "bridge-launch:" + j.id))
          adopted[j.id] = *id;
    // A retried job's state is its newest attempt's.
    std::map<std::string, std::vector<SlurmAttempt>> attempts;  // registry id -> attempts
    for (const auto& j : jobs)
      if (!j.job_dir.empty()) attempts[j.id] = read_slurm_attempts(j.job_dir);
    auto slurm_id = [&](const JobRecord& j) {
      auto it = adopted.find(j.id);
      std::string latest = latest_slurm_job(attempts[j.id]);
      return !latest.empty() ? latest : it != adopted.end() ? it->second : j.scheduler_id;
    };
    std::vector<std::string> ids;
    for (const auto& j : jobs)  // a damaged id is reported unknown, never passed to Slurm
      if (is_slurm_job_id(slurm_id(j)) &&
          std::find(ids.begin(), ids.end(), slurm_id(j)) == ids.end())
        ids.push_back(slurm_id(j));
    // Slurm's words about these jobs show none of their secrets (their values as this
    // environment has them: the registry records none).
    for (const auto& j : jobs)
      for (const auto& name : secret_env_names(j))
        if (auto value = services_.env.get(name)) diags.add_secret(*value);
    std::map<std::string, SlurmJobInfo> known;
    std::string error;
    if (!ids.empty()) error = query(ids, known, diags.secrets());
    if (!error.empty())
      diags.error("slurm-status-failed", "", {},
                  fmt::format("cannot get job states from Slurm:\n    {}", error), help_for(error));
    std::vector<JobStatus> out;
    for (const auto& j : jobs) {
      auto it = known.find(slurm_id(j));
      if (it != known.end()) {
        JobStatus st = to_job_status(it->second);
        if (st.state == JobState::kFailed)
          add_failing_task(on_attempt(j, attempts[j.id], true), st);
        if (adopted.count(j.id)) st.scheduler_id = slurm_id(j);
        describe_attempts(attempts[j.id], st);
        out.push_back(st);
        continue;
      }
      JobStatus s;
      s.state = JobState::kUnknown;
      s.detail = !error.empty() ? "Slurm not reachable"
                 : j.scheduler_id.empty()
                     ? "no Slurm job id recorded"
                     : fmt::format(
                           "job {} is unknown to squeue, sacct and scontrol (finished "
                           "longer ago than MinJobAge, without accounting)",
                           j.scheduler_id);
      out.push_back(s);
    }
    return out;
  }

  // `scontrol show job ID` costs the controller two RPCs, squeue three (it also loads the
  // partitions): --wait polls through here. A job scontrol does not know (gone past
  // MinJobAge) or an error goes the full way of status() (squeue, sacct, scontrol).
  JobStatus poll(const JobRecord& recorded, Diagnostics& diags) const override {
    std::vector<SlurmAttempt> attempts = recorded.job_dir.empty()
                                             ? std::vector<SlurmAttempt>{}
                                             : read_slurm_attempts(recorded.job_dir);
    if (attempts.size() > 1) return status({recorded}, diags).front();  // says which attempt
    const JobRecord job = on_attempt(recorded, attempts, false);
    if (is_slurm_job_id(job.scheduler_id)) {
      CommandSpec spec;
      spec.argv = {"scontrol", "--oneliner", "show", "job", job.scheduler_id};
      CommandResult r = slurm_.run(spec);
      if (r.ok())
        for (const auto& info : parse_scontrol_jobs(r.out))
          if (info.id == job.scheduler_id) {
            JobStatus st = to_job_status(info);
            if (st.state == JobState::kFailed) add_failing_task(job, st);
            return st;
          }
    }
    return status({job}, diags).front();
  }

  int logs(const JobRecord& recorded, const LogQuery& query, std::ostream& out, std::ostream& notes,
           Diagnostics& diags) const override {
    if (!check_log_query(recorded, query, diags)) return kExitUsage;
    const JobRecord job = on_attempt(recorded, true);
    std::map<fs::path, LogTail> sources;
    auto refresh = [&]() {
      for (auto& s : discover_logs(job, query)) {
        if (sources.count(s.path())) continue;
        auto& added = sources.emplace(s.path(), s).first->second;
        if (query.tail) added.start_at_last_lines(*query.tail);
      }
    };
    auto ordered = [&]() {
      std::vector<LogTail*> v;
      for (auto& s : discover_logs(job, query)) v.push_back(&sources.at(s.path()));
      return v;
    };
    bool prefix = !query.rank;
    auto pump_all = [&](bool final) {
      for (auto* s : ordered()) s->pump(out, prefix, final, query.grep);
    };
    refresh();
    if (!query.follow) {
      std::error_code ec;
      if (!fs::is_directory(job.job_dir, ec))
        diags.warning("no-logs-yet", "", {},
                      fmt::format("no logs in {} yet (the job may still be pending)", job.job_dir));
      pump_all(/*final=*/true);
      return 0;
    }
    int failures = 0;
    PendingNotice pending;
    while (true) {
      refresh();
      pump_all(/*final=*/false);
      Diagnostics quiet;
      JobStatus st = status({recorded}, quiet).front();
      if (quiet.has_errors()) {
        if (++failures >= kMaxStatusFailures) {
          for (const auto& d : quiet.items()) diags.error(d.code, d.path, d.loc, d.message, d.help);
          return kExitRuntime;
        }
      } else {
        failures = 0;
        pending.update(recorded, st, notes);
      }
      if (is_final(st.state) || (st.state == JobState::kUnknown && !quiet.has_errors())) {
        services_.sleeper.pause_for(std::chrono::milliseconds(200));  // last writes land
        refresh();
        pump_all(/*final=*/true);
        return 0;
      }
      services_.sleeper.pause_for(kPollInterval);
    }
  }

  FailureEvidence failure_evidence(const JobRecord& recorded, Diagnostics&) const override {
    return evidence(recorded, /*summary=*/false);
  }

  FailureEvidence failure_summary_evidence(const JobRecord& recorded, Diagnostics&) const override {
    return evidence(recorded, /*summary=*/true);
  }

  // `summary`: only the units srun reported failed (at most kSummaryUnits of them) read their
  // logs; else every unit's log is read.
  FailureEvidence evidence(const JobRecord& recorded, bool summary) const {
    // The last attempt's files only: the job dir's rank logs are its own (the script moved the
    // earlier ones to attempt<K>/), and its batch stderr is named after its Slurm id.
    const JobRecord job = on_attempt(recorded, true);
    FailureEvidence e;
    std::error_code ec;
    bool per_node = fs::exists(fs::path(job.job_dir) / "node0.log", ec) &&
                    !fs::exists(fs::path(job.job_dir) / "rank0.log", ec);
    if (!summary) e.units = job_dir_evidence(job.job_dir);
    std::vector<std::string> err = batch_stderr_lines(job);
    if (!e.units.empty()) per_node = e.units.front().node.has_value();
    std::map<int, size_t> by_task;  // srun task (a rank, or a node under torchrun) -> unit
    for (size_t i = 0; i < e.units.size(); ++i)
      by_task[per_node ? *e.units[i].node : e.units[i].rank.value_or(-1)] = i;
    int order = 0;
    for (const auto& r : parse_srun_task_reports(err)) {
      for (int task : r.tasks) {
        if (!by_task.count(task)) {  // failed before it wrote a line: still a failed unit
          if (summary && e.units.size() >= kSummaryUnits) continue;  // left to `why`
          RankEvidence u;
          if (summary) {
            u = job_dir_unit_evidence(job.job_dir, task, per_node);
          } else {
            u.label = fmt::format("{} {}", per_node ? "node" : "rank", task);
            (per_node ? u.node : u.rank) = task;
          }
          e.units.push_back(std::move(u));
          by_task[task] = e.units.size() - 1;
        }
        RankEvidence& u = e.units[by_task[task]];
        if (u.failure_order) continue;
        u.host = r.host;
        u.exit_code = r.exit_code;
        u.signal = r.signal;
        if (!r.exit_code && !r.signal) u.ended = r.text;  // srun's words we do not know
        u.failure_order = order;
      }
      ++order;
    }
    // Ranks srun did not report (they ended well, or were stopped) get their node's host
    // from the allocation's node list the batch script wrote.
    std::vector<std::string> hosts = job_dir_hosts(job.job_dir);
    const int per_node_ranks = ranks_per_node(job);
    for (auto& u : e.units) {
      int node = u.node ? *u.node : (u.rank ? *u.rank / per_node_ranks : -1);
      if (u.host.empty() && node >= 0 && node < static_cast<int>(hosts.size()))
        u.host = hosts[static_cast<size_t>(node)];
    }
    if (order > 0)
      e.order_source = fmt::format("srun's task reports in slurm-{}.err", job.scheduler_id);
    for (auto& line : err)
      if (line.rfind("srun: error: ", 0) != 0) e.scheduler_lines.push_back(std::move(line));
    // The attempt whose logs these are: the newest that started (a retry may be queued).
    int attempt = 1;
    for (const SlurmAttempt& a : read_slurm_attempts(job.job_dir))
      if (!a.started_at.empty()) attempt = a.number;
    if (auto watchdog = watchdog_verdict_line(job.job_dir, attempt))
      e.scheduler_lines.push_back(std::move(*watchdog));
    return e;
  }

  std::string current_scheduler_id(const JobRecord& job) const override {
    return on_attempt(job, false).scheduler_id;
  }

  std::vector<std::string> attempt_history(const JobRecord& job) const override {
    std::vector<SlurmAttempt> attempts =
        job.job_dir.empty() ? std::vector<SlurmAttempt>{} : read_slurm_attempts(job.job_dir);
    return attempts.size() > 1 || (attempts.size() == 1 && attempts[0].ended)
               ? attempt_lines(attempts)
               : std::vector<std::string>{};
  }

  // The attempts after the first are submitted by the job itself: the `cancelled` mark in the
  // job dir stops one that is on its way (the script checks it before it resubmits and when an
  // attempt starts), and scancel stops the newest attempt known.
  int cancel(const JobRecord& recorded, Diagnostics& diags) const override {
    if (!recorded.job_dir.empty() && fs::exists(fs::path(recorded.job_dir) / kAttemptsFile))
      std::ofstream(fs::path(recorded.job_dir) / "cancelled") << "cancelled by bridge-launch\n";
    const JobRecord job = on_attempt(recorded, false);
    if (job.scheduler_id.empty()) {
      diags.error("slurm-cancel-failed", "", {}, "no Slurm job id recorded for " + job.id);
      return kExitRuntime;
    }
    if (!is_slurm_job_id(job.scheduler_id)) {
      diags.error("slurm-cancel-failed", "", {},
                  fmt::format("job {} has no valid Slurm job id in the registry (`{}`)", job.id,
                              printable_text(job.scheduler_id, 40)),
                  "cancel it with scancel yourself; the registry entry may be damaged");
      return kExitRuntime;
    }
    for (const auto& name : secret_env_names(job))
      if (auto value = services_.env.get(name)) diags.add_secret(*value);
    CommandSpec spec;
    spec.argv = {"scancel", job.scheduler_id};
    CommandResult r = slurm_.run(spec);
    if (!r.ok()) {
      std::string message = slurm_error_text("scancel", r);
      diags.error("slurm-cancel-failed", "", {},
                  fmt::format("scancel of Slurm job {} failed:\n    {}", job.scheduler_id, message),
                  help_for(message));
      return kExitRuntime;
    }
    services_.log.info("cancel requested for Slurm job {}", job.scheduler_id);
    return 0;
  }

 private:
  // Fills `known` for `ids`; returns "" or the error that made the query impossible.
  std::string query(const std::vector<std::string>& ids, std::map<std::string, SlurmJobInfo>& known,
                    const std::vector<std::string>& secrets) const {
    auto keep = [&](const std::vector<SlurmJobInfo>& infos) {
      for (const auto& i : infos)
        if (std::find(ids.begin(), ids.end(), i.id) != ids.end() && !known.count(i.id))
          known[i.id] = i;
    };
    auto missing = [&]() {
      std::vector<std::string> m;
      for (const auto& id : ids)
        if (!known.count(id)) m.push_back(id);
      return m;
    };
    CommandSpec sq;
    sq.argv = {"squeue", "--noheader", "--states=all", "--jobs=" + join_ids(ids),
               "--format=%i|%T|%r|%S|%e"};
    CommandResult r = slurm_.run(sq);
    if (r.ok())
      keep(parse_squeue(r.out));
    else if (r.err.find("Invalid job id specified") == std::string::npos)
      return slurm_error_text("squeue", r);

    if (!missing().empty() && !accounting_disabled_.load()) {
      CommandSpec sa;
      sa.argv = {"sacct",
                 "--noheader",
                 "--parsable2",
                 "--allocations",
                 "--jobs=" + join_ids(missing()),
                 "--format=JobIDRaw,State,ExitCode,Start,End"};
      CommandResult a = slurm_.run(sa);
      if (a.ok()) {
        keep(parse_sacct(a.out));
      } else if ((a.err + a.out).find("accounting storage is disabled") != std::string::npos) {
        accounting_disabled_.store(true);
      } else {
        services_.log.debug("sacct failed: {}",
                            scrub_secrets(slurm_error_text("sacct", a), secrets));
      }
    }

    std::vector<std::string> rest = missing();
    if (!rest.empty()) {
      CommandSpec sc;
      sc.argv = {"scontrol", "--oneliner", "show", "job"};
      if (rest.size() == 1) sc.argv.push_back(rest.front());
      CommandResult c = slurm_.run(sc);
      if (c.ok())
        keep(parse_scontrol_jobs(c.out));
      else if (c.err.find("Invalid job id specified") == std::string::npos)
        services_.log.debug("scontrol show job failed: {}",
                            scrub_secrets(slurm_error_text("scontrol", c), secrets));
    }
    return "";
  }

  // sbatch reading its script from stdin; `secrets` are added to its environment.
  CommandSpec sbatch_spec(const std::map<std::string, std::string>& secrets) const {
    CommandSpec spec;
    spec.argv = {"sbatch", "--parsable"};
    spec.extra_env = secrets;
    spec.timeout = policy_.timeout;
    // A Ctrl-C at the terminal waits for the submission (DeferredInterrupts in the CLI) and
    // must not kill sbatch half-way (it may have reached the controller already): sbatch runs
    // in a process group of its own, as every program the runner starts.
    return spec;
  }

  // The sbatch prepare_to_submit started, when its command line and environment are the ones
  // this submission needs: the script must carry the comment, and as it inherited the
  // launcher's environment, each secret must have its value there already (a secret whose
  // value the recipe sets does not). Otherwise it is stopped before it read anything.
  std::unique_ptr<StartedCommand> take_ready_sbatch(
      const std::map<std::string, std::string>& secrets, bool tagged_by_script) const {
    std::unique_ptr<StartedCommand> ready = std::move(ready_sbatch_);
    if (!tagged_by_script) return nullptr;
    for (const auto& [name, value] : secrets)
      if (services_.env.get(name) != value) return nullptr;
    return ready;
  }

  // The id of our own job `name` carrying `comment`, if the controller has it.
  std::optional<std::string> find_by_comment(const std::string& name,
                                             const std::string& comment) const {
    CommandSpec spec;
    spec.argv = {"squeue", "--noheader", "--states=all", "--name=" + name, "--format=%i|%k"};
    CommandResult r = slurm_.run(spec);
    if (!r.ok()) return std::nullopt;
    for (const auto& info : parse_squeue(r.out))
      if (info.state == comment) return info.id;
    return std::nullopt;
  }

  ExecutorServices services_;
  SlurmClient slurm_;
  SlurmRetryPolicy policy_;  // sbatch's first try runs outside slurm_ (submit_script)
  // The sbatch prepare_to_submit started, waiting for a script; taken by the submission.
  // Mutable: rendering is const, and the job it returns submits through this executor.
  mutable std::unique_ptr<StartedCommand> ready_sbatch_;
  // Once sacct said "accounting storage is disabled", status stops asking it.
  mutable std::atomic<bool> accounting_disabled_{false};
};

}  // namespace

std::unique_ptr<Executor> make_slurm_executor(const ExecutorServices& services,
                                              SlurmRetryPolicy policy) {
  return std::make_unique<SlurmExecutor>(services, policy);
}

std::unique_ptr<Executor> make_slurm_executor(const ExecutorServices& services) {
  return make_slurm_executor(services, SlurmRetryPolicy{});
}

}  // namespace bridge
