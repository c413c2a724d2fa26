// --wait: following scheduler jobs until they end, and the signal handling around it.
#include "launcher/cli_wait.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <optional>

#include "executors/executor.h"
#include "jobs/job_lifecycle.h"
#include "jobs/job_progress.h"
#include "jobs/registry.h"
#include "launcher/cli_support.h"
#include "launcher/services.h"
#include "launcher/wait_schedule.h"

namespace bridge {

namespace {

// The token `--wait`'s signal handler cancels. The one process global of the wait: a signal
// handler gets no argument to find it by. Set by WaitInterrupts only while its handlers are
// installed; atomic (lock-free), so that the handler reads a whole pointer.
std::atomic<CancelToken*> g_wait_cancel{nullptr};
static_assert(std::atomic<CancelToken*>::is_always_lock_free);

}  // namespace

void on_wait_signal(int) {
  if (CancelToken* token = g_wait_cancel.load()) token->cancel();  // async-signal-safe
}

void set_wait_cancel(CancelToken* token) { g_wait_cancel = token; }

namespace {

// A start or end the scheduler does not report is recorded as the time --wait saw it (at
// most one poll late), so `status` can show a run time afterwards.
void note_seen_times(JobStatus& st, const JobRecord& rec, const std::string& now) {
  bool started = st.state == JobState::kRunning || is_final(st.state);
  if (started && st.started_at.empty() && rec.started_at.empty()) st.started_at = now;
  if (is_final(st.state) && st.ended_at.empty() && rec.ended_at.empty()) st.ended_at = now;
}

// One waited job: its record (kept current) and the last line printed for it.
struct WaitedJob {
  JobRecord* rec;
  std::string last_line;
  bool done = false;
};

// The states of the waited jobs that have not ended, by one scheduler query: `poll` (the
// cheapest query for one job) when one is left, else `status` over all of them (one squeue,
// one `kubectl get` per namespace), whatever their number.
std::vector<JobStatus> poll_all(const Executor& executor, const std::vector<WaitedJob*>& open,
                                Diagnostics& diags) {
  if (open.size() == 1) return {executor.poll(*open.front()->rec, diags)};
  std::vector<JobRecord> records;
  for (const auto* w : open) records.push_back(*w->rec);
  return executor.status(records, diags);
}

// "stopped waiting" for each job still open; the exit code of an interrupted wait.
int stop_waiting(const std::vector<WaitedJob*>& open, bool tty, std::ostream& err) {
  if (tty) err << "\n";
  for (const auto* w : open)
    err << fmt::format("stopped waiting; job {} keeps running (bridge-launch status {})\n",
                       w->rec->id, w->rec->id);
  return kExitInterrupted;
}

}  // namespace

// Follows scheduler jobs until they end. SIGINT stops the waiting only: the jobs keep
// running and `status` still finds them. A signal during a scheduler query stops the query
// too (the runner kills the client), and what it answered is not recorded.
int wait_for_jobs(const Executor& executor, const std::vector<JobRecord*>& records,
                  const JobRegistry& reg, const Context& c) {
  std::optional<CancelToken> own_token;  // a runner that watches no token (test fakes)
  CancelToken& token = c.services.cancel ? *c.services.cancel : own_token.emplace();
  WaitInterrupts interrupts(token);
  // One job gets one live line rewritten in place; several get a line per change.
  bool tty = isatty(STDERR_FILENO) && &c.err == &std::cerr && records.size() == 1;
  auto start = c.services.clock.steady_now();
  std::vector<WaitedJob> waited;
  for (JobRecord* r : records) waited.push_back({r, "", false});
  int rc = kExitOk;
  int polls = 0;
  for (;;) {
    std::vector<WaitedJob*> open;
    for (auto& w : waited)
      if (!w.done) open.push_back(&w);
    if (open.empty()) break;
    // Adaptive polling (launcher/wait_schedule.h): the jobs were just accepted, so the first
    // query waits too; Ctrl-C is still noticed within 200 ms.
    auto elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
        c.services.clock.steady_now() - start);
    auto next_poll = start + elapsed_ms + wait_poll_delay(elapsed_ms, polls++);
    while (!interrupts.interrupted() && c.services.clock.steady_now() < next_poll)
      c.services.sleeper.pause_for(std::chrono::milliseconds(200));
    Diagnostics diags;
    std::vector<JobStatus> states;
    if (!interrupts.interrupted()) states = poll_all(executor, open, diags);
    if (interrupts.interrupted()) {
      rc = stop_waiting(open, tty, c.err);
      break;
    }
    for (size_t i = 0; i < open.size() && i < states.size(); ++i) {
      WaitedJob& w = *open[i];
      JobRecord& rec = *w.rec;
      JobStatus& st = states[i];
      note_seen_times(st, rec, utc_time_text(c.services.clock.now()));
      if (st.state == JobState::kRunning && rec.state != JobState::kRunning) {
        Diagnostics ignored;  // the start time is recorded once; `status` retries a failed write
        JobLifecycle(reg).observe(rec, st, ignored);
      }
      std::optional<JobProgress> progress;
      if (st.state == JobState::kRunning) progress = live_progress(executor, rec);
      std::string line = fmt::format(
          "{} {}{}{}", rec.id, job_state_name(st.state),
          progress ? " " + progress_text(*progress) : "",
          st.detail.empty() || st.detail == job_state_name(st.state) ? "" : " (" + st.detail + ")");
      auto waited_for =
          std::chrono::duration_cast<std::chrono::seconds>(c.services.clock.steady_now() - start);
      auto ran = job_elapsed(rec, c.services.clock.now());
      std::string clock = ran ? "[elapsed " + duration_text(*ran) + "]"
                              : "[waited " + duration_text(waited_for) + "]";
      if (tty)
        c.err << fmt::format("\r\033[K{} {}", line, clock) << std::flush;
      else if (line != w.last_line)
        c.err << line << " " << clock << "\n";
      w.last_line = line;
      if (!is_final(st.state)) continue;
      if (tty) c.err << "\n";
      Diagnostics ignored;  // a stale entry is refreshed by the next `status`
      JobLifecycle(reg).observe(rec, st, ignored);
      if (st.state != JobState::kSucceeded) rc = kExitRuntime;
      rec.state = st.state;
      rec.state_detail = st.detail;
      print_failure_summary(executor, rec, c.err);
      w.done = true;
    }
    // A signal while a job's progress or failure summary was being read (that query was
    // stopped too): the wait ends as interrupted, naming the jobs still open.
    if (interrupts.interrupted()) {
      std::vector<WaitedJob*> left;
      for (WaitedJob* w : open)
        if (!w->done) left.push_back(w);
      rc = stop_waiting(left, tty, c.err);
      break;
    }
  }
  return rc;
}

int wait_for_job(const Executor& executor, JobRecord& rec, const JobRegistry& reg,
                 const Context& c) {
  return wait_for_jobs(executor, {&rec}, reg, c);
}

}  // namespace bridge
