// The local executor: every rank of the job as a process on this machine.
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <sstream>
#include <string_view>

#include "base/exit_codes.h"
#include "base/numbers.h"
#include "base/utf8.h"
#include "executors/executor.h"
#include "executors/job_dir.h"
#include "executors/rank_env.h"
#include "executors/rank_logs.h"
#include "jobs/job_progress.h"
#include "jobs/job_watchdog.h"
#include "plan/plan_confirm.h"
#include "system/file_read.h"
#include "system/process_group.h"

namespace bridge {

namespace {

// The machine the local ranks run on, as `logs` and `why` name it.
std::string this_host() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return host;
}

namespace fs = std::filesystem;

// `bridge-probe` is the one built with this bridge-launch (so a build tree runs its own
// probe); any other program is found on PATH by the rank.
std::string resolve_program(const std::string& name, const std::string& probe_dir) {
  if (name == "bridge-probe" && !probe_dir.empty()) return probe_dir + "/" + name;
  return name;
}

// The variables every rank shares: the planned launch env, then the probe's checks.
std::vector<std::pair<std::string, std::string>> job_vars(const Plan& plan) {
  std::vector<std::pair<std::string, std::string>> vars;
  for (const auto& v : plan.env.vars) vars.emplace_back(v.name, v.value);
  for (auto& kv : bridge_check_vars(plan)) vars.push_back(std::move(kv));
  return vars;
}

std::vector<std::pair<std::string, std::string>> rendezvous_vars(const Plan& plan, int rank,
                                                                 const std::string& port) {
  std::string world = std::to_string(plan.topology->gpus_per_node);
  return {{"RANK", std::to_string(rank)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"WORLD_SIZE", world},
          {"LOCAL_WORLD_SIZE", world},
          {"NODE_RANK", "0"},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", port}};
}

// runtime.code (plan/code_plan.h): the tree's directory, and its python_path first on
// PYTHONPATH, ahead of the one the ranks would have had (the plan's, else this host's).
std::vector<std::pair<std::string, std::string>> code_vars(const Plan& plan,
                                                           const std::string& job_id,
                                                           const HostEnvironment& host) {
  if (!plan.code) return {};
  std::optional<std::string> inherited = host.get("PYTHONPATH");
  if (const EnvVar* v = plan.env.find("PYTHONPATH")) inherited = v->value;
  std::string path = code_python_path(*plan.code, job_id);
  if (inherited && !inherited->empty()) path += ":" + *inherited;
  return {{"BRIDGE_CODE_DIR", code_rank_dir(*plan.code, job_id)}, {"PYTHONPATH", path}};
}

// With torchrun one process starts the local ranks itself.
bool uses_torchrun(const Plan& plan) {
  return plan.job.runtime.launcher.get_or("direct") == "torchrun";
}

// The job's own directory: <job dir>/<job id> (make_run_dir creates it).
std::string local_run_dir(const Plan& plan, const std::string& job_id) {
  // The CLI always fixes a job id (render's identity); "run" only guards a caller that did not.
  return plan.job_dir + "/" + (job_id.empty() ? "run" : job_id);
}

std::vector<std::string> launcher_argv(const Plan& plan, const std::string& port,
                                       const std::string& probe_dir, const std::string& job_id) {
  std::vector<std::string> argv;
  if (uses_torchrun(plan)) {
    argv = plan.executor_changes.launcher_wrapper;
    if (argv.empty()) argv.push_back("torchrun");
    for (std::string a : {"--nnodes=1", "--node-rank=0", "--master-addr=127.0.0.1"})
      argv.push_back(a);
    argv.push_back(fmt::format("--nproc-per-node={}", plan.topology->gpus_per_node));
    argv.push_back("--master-port=" + port);
    argv.push_back("--no-python");  // runtime.command names the program, e.g. [python, x.py]
  }
  std::vector<std::string> cmd = rank_command(plan, local_run_dir(plan, job_id));
  if (!cmd.empty()) cmd[0] = resolve_program(cmd[0], probe_dir);
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  return argv;
}

// Values the user asked to be shell-expanded are exported by a tiny bash wrapper on the
// rank itself, exactly as a batch script would (`export NAME="value"`); everything else is
// passed verbatim. The value travels in the rank's environment (NAME holds its text) and is
// expanded from there, never in the wrapper's arguments: /proc/PID/cmdline is readable by
// every user on the machine, and the value may be a secret.
std::vector<std::string> wrap_expanded(const Plan& plan, std::vector<std::string> argv) {
  std::string exports;
  for (const auto& v : plan.env.vars)
    if (v.expand) exports += fmt::format("eval \"export {0}=\\\"${{{0}}}\\\"\"; ", v.name);
  if (exports.empty()) return argv;
  std::vector<std::string> wrapped{"/bin/bash", "-c", exports + "exec \"$@\"", "bridge-rank"};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  return wrapped;
}

std::string free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "29500";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  std::string port = "29500";
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = std::to_string(ntohs(addr.sin_port));
  close(fd);
  return port;
}

// The submitting environment minus anything the job sets itself.
std::vector<std::string> base_environment(const HostEnvironment& host,
                                          const std::map<std::string, std::string>& job) {
  std::vector<std::string> env;
  for (const auto& [name, value] : host.all())
    if (!job.count(name)) env.push_back(name + "=" + value);
  return env;
}

// The launcher pid of a local scheduler id: "<pid>.<sequence>" (older entries: "<pid>").
std::string launcher_pid_text(const std::string& scheduler_id) {
  return scheduler_id.substr(0, scheduler_id.find('.'));
}

// A file the launcher writes in the job dir, by descriptor (create_job_file): a line at a
// time, each written whole before the next, so `logs -f` and `why` see complete lines.
struct RankLog {
  int fd = -1;
  RankLog() = default;
  RankLog(const RankLog&) = delete;
  RankLog& operator=(const RankLog&) = delete;
  ~RankLog() {
    if (fd >= 0) close(fd);
  }
  bool write_all(std::string_view text) const {
    while (!text.empty()) {
      ssize_t n = write(fd, text.data(), text.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      text.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  bool write_line(const std::string& line) const { return write_all(line + '\n'); }
};

// The lock file by which a job's launcher says it is alive (take_owner_lock).
constexpr const char* kOwnerLockFile = ".launcher.lock";

// Takes the job's owner lock: an exclusive flock on <job dir>/.launcher.lock, held from before
// the job is recorded until this process exits. The descriptor is deliberately never closed:
// the lock must outlive the run itself, up to and including the launcher's final write of the
// job's outcome to the registry, and the kernel releases it however the process ends (a kill
// included). O_CLOEXEC keeps it out of the ranks. False when the lock cannot be taken.
bool take_owner_lock(const fs::path& dir) {
  int fd = open((dir / kOwnerLockFile).c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                0600);
  if (fd < 0) return false;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return false;
  }
  return true;  // the descriptor stays open on purpose (see above)
}

// Whether the job in `job_dir` still has its launcher: someone holds its owner lock. A pid alone
// says nothing (it may have been reused, even by another bridge-launch), and the launcher's
// open rank logs end before its final registry write, so a reader that judged by them could
// mark a job that succeeded as FAILED (docs/reliability.md, "Readers and the job's owner").
// Entries of launchers older than the lock are judged by the rank logs the launcher holds.
bool launcher_alive(const std::string& scheduler_id, const std::string& job_dir) {
  if (job_dir.empty()) return false;
  // O_NONBLOCK: a FIFO planted as the lock must not hang `status` waiting for a writer.
  int fd = open((fs::path(job_dir) / kOwnerLockFile).c_str(),
                O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd >= 0) {
    bool held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);  // also releases the shared lock if it was taken
    return held;
  }
  const std::string pid_text = launcher_pid_text(scheduler_id);
  auto pid = parse_decimal<int>(pid_text);
  if (!pid || *pid <= 0 || kill(static_cast<pid_t>(*pid), 0) != 0) return false;
  std::error_code ec;
  const std::string prefix = fs::path(job_dir).lexically_normal().string() + "/";
  for (const auto& fd_link : fs::directory_iterator("/proc/" + pid_text + "/fd", ec)) {
    fs::path target = fs::read_symlink(fd_link.path(), ec);
    if (!ec && target.string().rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// One process (and three file descriptors in the launcher) per rank: well above any real
// node's GPU count, and below the usual 1024-descriptor limit.
constexpr int64_t kMaxLocalRanks = 256;

class LocalExecutor : public Executor {
 public:
  explicit LocalExecutor(const ExecutorServices& services) : services_(services) {}

  std::unique_ptr<PreparedJob> render(const Plan& plan, const SubmissionIdentity& identity,
                                      Diagnostics& diags) const override {
    const Topology& t = *plan.topology;
    if (t.nodes != 1) {
      diags.error("local-needs-one-node", "cluster.num_gpus", plan.job.cluster.num_gpus.loc,
                  fmt::format("the local executor runs one node, but the plan has {} nodes "
                              "({} GPUs, {} per node)",
                              t.nodes, t.num_gpus, t.gpus_per_node),
                  "set -ng equal to -gn, or use --executor slurm/kubernetes");
      return nullptr;
    }
    if (t.gpus_per_node > kMaxLocalRanks) {
      diags.error("local-too-many-ranks", "cluster.gpus_per_node",
                  plan.job.cluster.gpus_per_node.loc,
                  fmt::format("the local executor would start {} rank processes on this machine; "
                              "it starts at most {}",
                              t.gpus_per_node, kMaxLocalRanks),
                  "lower -gn (one rank per GPU of this machine), or use --executor "
                  "slurm/kubernetes");
      return nullptr;
    }
    std::string text = fmt::format(
        "# local job `{}`: {} rank{} on this machine; MASTER_PORT is a free port picked at "
        "launch\n# job dir: {}/<job id>\n",
        *plan.job.name.value, t.gpus_per_node, t.gpus_per_node == 1 ? "" : "s", plan.job_dir);
    text += "env of every process (values exactly as the ranks receive them):\n";
    for (const auto& v : plan.env.vars)
      text += fmt::format("  {}={}{}\n", v.name, v.secret ? "<secret>" : shell_quote(v.value),
                          v.expand ? "  (expanded by the shell on the rank)" : "");
    for (auto& [k, v] : bridge_check_vars(plan)) text += fmt::format("  {}={}\n", k, v);
    if (plan.code)
      text += fmt::format(
          "  BRIDGE_CODE_DIR={}\n  PYTHONPATH={}  (then the PYTHONPATH the ranks inherit)\n",
          shell_quote(code_rank_dir(*plan.code, identity.job_id)),
          shell_quote(code_python_path(*plan.code, identity.job_id)));
    std::string cmd;
    for (const auto& a : launcher_argv(plan, "<auto>", services_.probe_dir, identity.job_id))
      cmd += " " + shell_quote(a);
    if (uses_torchrun(plan)) {
      text += "one torchrun process starts the ranks:\n  command:" + cmd + "\n";
    } else {
      for (int r = 0; r < static_cast<int>(t.gpus_per_node); ++r) {
        text += fmt::format("rank {}:", r);
        for (auto& [k, v] : rendezvous_vars(plan, r, "<auto>")) text += fmt::format(" {}={}", k, v);
        text += "\n  command:" + cmd + "\n";
      }
    }
    return std::make_unique<BoundJob>(
        std::move(text),
        [this, &plan, identity](const SubmitOptions& options, std::ostream& out,
                                Diagnostics& submit_diags, const OnAccepted& accepted) {
          return run(plan, identity, options, out, submit_diags, accepted);
        });
  }

  SubmitResult run(const Plan& plan, const SubmissionIdentity& identity,
                   const SubmitOptions& options, std::ostream& out, Diagnostics& diags,
                   const OnAccepted& on_accepted) const {
    SubmitResult sr;
    fs::path dir = make_run_dir(plan, identity.job_id, diags);
    if (dir.empty()) {
      sr.exit_code = kExitRuntime;
      return sr;
    }
    sr.job_dir = dir.string();
    if (!take_owner_lock(dir)) {
      diags.error("job-dir", "executor.local.job_dir", plan.job.executor.local.job_dir.loc,
                  fmt::format("cannot create the job's lock file {}: {}",
                              (dir / kOwnerLockFile).string(), std::strerror(errno)),
                  "check that the job directory is writable and not shared with another job");
      sr.exit_code = kExitRuntime;
      return sr;
    }
    // The plan confirmation's program and request, which every rank's runtime starts through.
    if (Status wrote = write_job_files(dir.string(), plan_confirmation_files(plan)); !wrote.ok()) {
      diags.error("job-dir", "executor.local.job_dir", plan.job.executor.local.job_dir.loc,
                  wrote.why(), "check that the job directory is writable and has free space");
      sr.exit_code = kExitRuntime;
      return sr;
    }
    // One launcher process runs an ablate's local jobs one after another: the sequence
    // keeps their ids apart, the pid part is what launcher_alive and cancel use.
    sr.scheduler_id = fmt::format("{}.{}", getpid(), identity.sequence);
    std::string port = free_port();
    std::vector<RankSpec> specs = rank_specs(plan, port, identity.job_id);
    std::map<int, RankLog> logs;
    std::map<int, std::deque<std::string>> tails;
    // The first write error per rank log (a full disk): a log that silently ends early would
    // make a job look complete when its output is not.
    std::map<int, std::string> log_errors;
    for (const auto& s : specs) {
      // New files, never through a link: the job dir may be shared (executors/job_dir.h).
      logs[s.rank].fd = create_job_file((dir / fmt::format("rank{}.log", s.rank)).string());
      if (logs[s.rank].fd < 0) log_errors[s.rank] = std::strerror(errno);
    }
    // Accepted (and recorded) only now: `status` recognizes a live launcher by its owner
    // lock (launcher_alive), taken above, before the entry names the job dir.
    sr.accepted = true;
    if (on_accepted) on_accepted(sr);
    services_.log.info("launching `{}`: {} process{} on this machine, logs in {}",
                       *plan.job.name.value, specs.size(), specs.size() == 1 ? "" : "es",
                       dir.string());
    bool quiet = options.verbosity < 0;
    ProgressWatch watch(plan.watchdog, std::chrono::steady_clock::now());
    // The ranks that may print iteration lines; under torchrun its one process (index 0)
    // carries every rank's output.
    const std::vector<int> watched =
        progress_ranks(plan.progress_rank, static_cast<int>(plan.topology->num_gpus));
    std::optional<WatchdogEvent> verdict;
    LineSink sink = [&](int rank, const std::string& line) {
      if (std::find(watched.begin(), watched.end(), rank) != watched.end())
        watch.on_line(rank, line, std::chrono::steady_clock::now());
      RankLog& log = logs[rank];
      if (log.fd >= 0 && !log.write_line(line)) log_errors.emplace(rank, std::strerror(errno));
      auto& tail = tails[rank];
      tail.push_back(line);
      if (tail.size() > 10) tail.pop_front();
      if (!quiet) out << "[rank " << rank << "] " << line << '\n' << std::flush;
    };
    GroupOptions go;
    go.grace = std::chrono::seconds(plan.job.executor.local.grace_period.get_or(5));
    go.timeout = std::chrono::seconds(plan.job.executor.local.timeout.get_or(0));
    go.stop_requested = [&] {
      verdict = watch.due(std::chrono::steady_clock::now());
      return verdict.has_value();
    };
    GroupResult result = run_process_group(specs, go, sink);
    if (result.stopped_on_request && verdict) record_watchdog(dir, *verdict);
    if (result.leftovers_stopped > 0)
      services_.log.warn(
          "stopped {} process{} the ranks had left running outside the job (daemons)",
          result.leftovers_stopped, result.leftovers_stopped == 1 ? "" : "es");
    write_exits(dir, result);
    if (result.stopped_on_request && verdict && !result.first_failure && !result.interrupted)
      report_watchdog(*verdict, diags, sr);
    else
      report(plan, result, tails, dir, diags, sr);
    report_log_errors(log_errors, dir, diags, sr);
    return sr;
  }

  std::vector<JobStatus> status(const std::vector<JobRecord>& jobs, Diagnostics&) const override {
    std::vector<JobStatus> out;
    for (const auto& j : jobs) {
      JobStatus s;
      s.state = j.state;
      s.detail = j.state_detail;
      s.exit_code = j.exit_code;
      // An entry without a scheduler id is still being submitted by its launcher, which
      // records the id and the job dir once the job dir exists: nothing to judge yet (a
      // launcher killed then leaves the entry saying so, JobLifecycle::submitting).
      if (j.scheduler_id.empty() && j.state == JobState::kPending) {
        out.push_back(std::move(s));
        continue;
      }
      if (!is_final(j.state) && !launcher_alive(j.scheduler_id, j.job_dir)) {
        s.state = JobState::kFailed;
        // Only what is known: the ranks themselves got SIGKILL with the launcher
        // (PR_SET_PDEATHSIG); what they started in other process groups is not tracked.
        s.detail = "the launcher process " + launcher_pid_text(j.scheduler_id) +
                   " is gone (killed?); its rank processes were killed with it, processes "
                   "they started themselves may still run";
      }
      out.push_back(std::move(s));
    }
    return out;
  }

  int logs(const JobRecord& job, const LogQuery& query, std::ostream& out, std::ostream&,
           Diagnostics& diags) const override {
    if (!check_log_query(job, query, diags)) return kExitUsage;
    std::string host = this_host();
    return print_rank_logs(
        job, query, [&](int) { return host; }, out, diags, services_.sleeper,
        [&] {
          return !is_final(status({job}, diags)[0].state) &&
                 launcher_alive(job.scheduler_id, job.job_dir);
        });
  }

  FailureEvidence failure_evidence(const JobRecord& job, Diagnostics&) const override {
    FailureEvidence e;
    e.units = job_dir_evidence(job.job_dir);
    std::string host = this_host();
    std::map<int, RankEvidence*> by_rank;
    for (auto& u : e.units) {
      u.host = host;
      if (u.rank) by_rank[*u.rank] = &u;
    }
    // A line a rank (at most kMaxLocalRanks, lines of at most 64 bytes): 1 MiB is far above
    // the launcher's own file, and a FIFO or link in its place is no list (system/file_read.h).
    StatusOr<std::string> exits =
        read_regular_file(fs::path(job.job_dir) / kExitsFile, size_t{1} << 20);
    std::istringstream in(exits.ok() ? *exits : std::string());
    std::string line;
    int order = 0;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#' || line.size() > 64) continue;
      std::istringstream fields(line);
      std::string rank, code, sig;
      fields >> rank >> code >> sig;
      auto r = parse_decimal<int>(rank);
      if (!r || !by_rank.count(*r)) continue;
      RankEvidence& u = *by_rank[*r];
      if (auto c = parse_decimal<int>(code)) u.exit_code = *c;
      if (auto g = parse_decimal<int>(sig)) u.signal = *g;
      if (u.failed()) u.failure_order = order++;
    }
    if (order > 0) e.order_source = "the order in which the launcher saw the ranks exit";
    if (auto watchdog = watchdog_verdict_line(job.job_dir, 1))
      e.scheduler_lines.push_back(std::move(*watchdog));
    return e;
  }

  int cancel(const JobRecord& job, Diagnostics& diags) const override {
    if (is_final(job.state) || !launcher_alive(job.scheduler_id, job.job_dir)) {
      diags.error("job-not-running", "", {}, fmt::format("job {} is not running", job.id));
      return kExitRuntime;
    }
    // launcher_alive checked that the id is the live launcher of this very job.
    kill(static_cast<pid_t>(parse_decimal<int>(launcher_pid_text(job.scheduler_id)).value_or(0)),
         SIGTERM);
    return 0;
  }

 private:
  static constexpr const char* kExitsFile = "exits.tsv";

  // How each rank ended, in the order the launcher saw them end: what `why` reads to name
  // the first failure. "rank<TAB>exit code<TAB>signal", `-` for the one that does not apply.
  void write_exits(const fs::path& dir, const GroupResult& result) const {
    std::string text = "# rank\texit_code\tsignal (in the order the ranks ended)\n";
    for (const auto& r : result.ranks)
      text += fmt::format("{}\t{}\t{}\n", r.rank, r.signaled ? "-" : std::to_string(r.exit_code),
                          r.signaled ? std::to_string(r.signal) : "-");
    RankLog out;
    out.fd = create_job_file((dir / kExitsFile).string());
    if (out.fd < 0 || !out.write_all(text))
      // `why` then names ranks by their logs only; the job's result is unaffected
      services_.log.warn("could not write {}: {}; `why` will not know the order the ranks ended in",
                         (dir / kExitsFile).string(), std::strerror(errno));
  }

  // The verdict in <job dir>/watchdog, where `why` and `status` read it (jobs/job_watchdog.h).
  void record_watchdog(const fs::path& dir, WatchdogEvent& verdict) const {
    verdict.at = utc_time_text(std::chrono::system_clock::now());
    RankLog out;
    out.fd = create_job_file((dir / kWatchdogFile).string());
    if (out.fd < 0 || !out.write_all(watchdog_event_line(verdict) + "\n"))
      services_.log.warn("could not write {}: {}", (dir / kWatchdogFile).string(),
                         std::strerror(errno));
  }

  // A hang fails the job with the watchdog's words; a teardown hang after the last iteration
  // is a success with a note (the ranks' SIGTERM exits are the watchdog's doing, not theirs).
  void report_watchdog(const WatchdogEvent& verdict, Diagnostics& diags, SubmitResult& sr) const {
    const std::string text = watchdog_event_text(verdict);
    if (verdict.kind == "teardown") {
      services_.log.warn("{}", text);
      sr.exit_code = kExitOk;
      sr.final_state = JobState::kSucceeded;
      sr.state_detail =
          "the watchdog ended the processes after training reached its last "
          "iteration (teardown hang)";
      sr.exit_code_of_rank.reset();
      return;
    }
    sr.exit_code = kExitRuntime;
    sr.final_state = JobState::kFailed;
    sr.state_detail = "hang: the watchdog ended the ranks";
    diags.error("hang", "runtime.watchdog", {}, text,
                "`bridge-launch why` names the rank that stopped first; raise "
                "runtime.watchdog's timeouts if the job only needed longer");
  }

  static fs::path make_run_dir(const Plan& plan, const std::string& job_id, Diagnostics& diags) {
    std::string run_dir = local_run_dir(plan, job_id);
    StatusOr<std::string> dir =
        make_own_job_dir(plan.job_dir, run_dir.substr(plan.job_dir.size() + 1));
    if (dir.ok()) return std::move(dir).value();
    diags.error("job-dir", "executor.local.job_dir", plan.job.executor.local.job_dir.loc,
                "cannot create the job's directory: " + dir.why(),
                "set executor.local.job_dir to a writable directory of your own");
    return {};
  }

  std::vector<RankSpec> rank_specs(const Plan& plan, const std::string& port,
                                   const std::string& job_id) const {
    std::vector<RankSpec> specs;
    int processes = uses_torchrun(plan) ? 1 : static_cast<int>(plan.topology->gpus_per_node);
    std::vector<std::string> argv =
        wrap_expanded(plan, launcher_argv(plan, port, services_.probe_dir, job_id));
    for (int r = 0; r < processes; ++r) {
      std::map<std::string, std::string> vars;
      for (auto& [k, v] : job_vars(plan)) vars[k] = v;
      for (auto& [k, v] : code_vars(plan, job_id, services_.env)) vars[k] = v;
      if (!uses_torchrun(plan))
        for (auto& [k, v] : rendezvous_vars(plan, r, port)) vars[k] = v;
      RankSpec s{r, argv, base_environment(services_.env, vars)};
      for (auto& [k, v] : vars) s.env.push_back(k + "=" + v);
      specs.push_back(std::move(s));
    }
    return specs;
  }

  // A job whose output was not fully saved is not a clean success.
  static void report_log_errors(const std::map<int, std::string>& log_errors, const fs::path& dir,
                                Diagnostics& diags, SubmitResult& sr) {
    if (log_errors.empty()) return;
    std::string which;
    for (const auto& [rank, why] : log_errors)
      which += fmt::format("{}rank{}.log ({})", which.empty() ? "" : ", ", rank, why);
    diags.error("rank-log-incomplete", "", {},
                fmt::format("the ranks' output could not be saved completely in {}: {}",
                            dir.string(), which),
                "free space under the job dir (executor.local.job_dir) and run the job again");
    if (sr.final_state == JobState::kSucceeded) {
      sr.final_state = JobState::kFailed;
      sr.exit_code = kExitRuntime;
      sr.state_detail = "the ranks exited 0, but their logs are incomplete (" + which + ")";
    }
  }

  void report(const Plan& plan, const GroupResult& result,
              std::map<int, std::deque<std::string>>& tails, const fs::path& dir,
              Diagnostics& diags, SubmitResult& sr) const {
    sr.exit_code = kExitRuntime;
    sr.final_state = JobState::kFailed;
    if (!result.spawn_error.empty()) {
      sr.state_detail = "could not start the ranks: " + result.spawn_error;
      diags.error("spawn-failed", "", {}, sr.state_detail);
      return;
    }
    if (result.interrupted) {
      services_.log.warn("interrupted by signal {}: all ranks stopped", result.interrupt_signal);
      sr.exit_code = kExitInterrupted;
      sr.final_state = JobState::kCancelled;
      sr.state_detail = fmt::format("interrupted by signal {}", result.interrupt_signal);
      return;
    }
    if (result.first_failure) {
      const RankOutcome& f = *result.first_failure;
      std::string how =
          f.signaled ? fmt::format("was killed by signal {} ({})", f.signal, strsignal(f.signal))
                     : fmt::format("exited with code {}", f.exit_code);
      std::string tail;
      // Bounded and terminal-safe: a rank may print anything, in lines of any length.
      for (const auto& l : tails[f.rank]) tail += "\n    " + printable_text(l, 300);
      sr.state_detail = fmt::format("rank {} {}", f.rank, how);
      sr.exit_code_of_rank = f.signaled ? 128 + f.signal : f.exit_code;
      diags.error("rank-failed", "", {},
                  fmt::format("{}; the other ranks were stopped. Last lines of its log "
                              "({}/rank{}.log):{}",
                              sr.state_detail, dir.string(), f.rank, tail));
      return;
    }
    if (result.timed_out) {
      sr.state_detail = "ran past executor.local.timeout";
      diags.error("job-timeout", "executor.local.timeout", plan.job.executor.local.timeout.loc,
                  "the job ran past executor.local.timeout and was stopped");
      return;
    }
    services_.log.info("job `{}` finished: {} process{} exited 0; logs in {}", *plan.job.name.value,
                       result.ranks.size(), result.ranks.size() == 1 ? "" : "es", dir.string());
    sr.exit_code = kExitOk;
    sr.final_state = JobState::kSucceeded;
  }

  ExecutorServices services_;
};

}  // namespace

std::unique_ptr<Executor> make_local_executor(const ExecutorServices& services) {
  return std::make_unique<LocalExecutor>(services);
}

}  // namespace bridge
