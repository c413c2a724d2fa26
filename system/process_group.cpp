#include "system/process_group.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "system/log_tail.h"  // kMaxLineBytes

namespace bridge {

namespace {

int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &b, 1);
  errno = saved;
}

// Installs SIGINT/SIGTERM/SIGHUP handlers for the duration of a run and restores the old
// ones. SIGHUP (the terminal or the ssh session went away) stops the job as SIGTERM does:
// the ranks get their grace period and the outcome is recorded.
class SignalGuard {
 public:
  SignalGuard() {
    if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) g_signal_pipe[0] = -1;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
    sigaction(SIGHUP, &sa, &old_hup_);
  }
  ~SignalGuard() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    sigaction(SIGHUP, &old_hup_, nullptr);
    for (int& fd : g_signal_pipe) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
  }
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_hup_ {};
};

// Processes a job leaves behind outside its process group (`setsid daemon &`) must not
// outlive it. While ranks run, the launcher is a child subreaper (PR_SET_CHILD_SUBREAPER):
// an orphaned descendant is re-parented to the launcher instead of to init, so when the
// ranks are gone every remaining child of the launcher is a leftover of this job.
class SubreaperGuard {
 public:
  SubreaperGuard() {
    prctl(PR_GET_CHILD_SUBREAPER, &was_);
    active_ = prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
  }
  ~SubreaperGuard() {
    if (active_ && was_ == 0) prctl(PR_SET_CHILD_SUBREAPER, 0);
  }
  SubreaperGuard(const SubreaperGuard&) = delete;
  SubreaperGuard& operator=(const SubreaperGuard&) = delete;
  bool active() const { return active_; }

 private:
  int was_ = 0;
  bool active_ = false;
};

// The live (not zombie) children of `parent`, from /proc/<pid>/stat.
std::vector<pid_t> live_children_of(pid_t parent) {
  std::vector<pid_t> kids;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    size_t close_paren = stat.rfind(')');  // the command name may hold spaces and parens
    if (close_paren == std::string::npos || close_paren + 4 > stat.size()) continue;
    char state = stat[close_paren + 2];
    long ppid = std::strtol(stat.c_str() + close_paren + 4, nullptr, 10);
    if (ppid == parent && state != 'Z' && state != 'X')
      kids.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return kids;
}

void reap_any_children() {
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

struct Running {
  int rank;
  pid_t pid;
  int fd;  // read end of the rank's output pipe, -1 once closed
  std::string partial;
  bool exited = false;
  std::chrono::steady_clock::time_point exited_at{};
  std::chrono::steady_clock::time_point closed_at{};  // when its pipe reached end of file
};

// How long a rank's pipe is still read after the rank exited. The end of a rank is its exit,
// not EOF on its pipe: a daemon it started (`setsid ... &`) may hold the pipe open forever.
constexpr std::chrono::seconds kDrainAfterExit{2};

[[noreturn]] void exec_child(const RankSpec& spec, int out_fd, pid_t pgid, pid_t launcher) {
  setpgid(0, pgid);
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // a SIGKILLed launcher leaves no orphaned rank
  // The launcher died before PDEATHSIG was armed. (Not `getppid() == 1`: the launcher itself
  // may be PID 1, as a container's entrypoint.)
  if (getppid() != launcher) _exit(127);
  dup2(out_fd, STDOUT_FILENO);
  dup2(out_fd, STDERR_FILENO);
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, STDIN_FILENO);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  execvpe(argv[0], argv.data(), envp.data());
  std::string msg = "bridge-launch: cannot start `" + spec.argv[0] + "`: " + strerror(errno) + "\n";
  [[maybe_unused]] ssize_t n = write(STDERR_FILENO, msg.data(), msg.size());
  _exit(127);
}

class GroupRunner {
 public:
  GroupRunner(const GroupOptions& o, const LineSink& sink) : options_(o), sink_(sink) {}

  GroupResult run(const std::vector<RankSpec>& specs) {
    start_ = Clock::now();
    for (const auto& s : specs)
      if (!spawn(s)) break;
    if (!result_.spawn_error.empty()) begin_shutdown(SIGTERM);
    while (!all_exited()) {
      poll_once();
      reap();
      enforce_deadlines();
    }
    for (auto& r : running_) flush_partial(r);
    if (options_.subreaper) stop_leftovers();
    return std::move(result_);
  }

 private:
  using Clock = std::chrono::steady_clock;

  bool spawn(const RankSpec& s) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      result_.spawn_error = std::string("pipe: ") + strerror(errno);
      return false;
    }
    pid_t launcher = getpid();
    pid_t pid = fork();
    if (pid < 0) {
      result_.spawn_error = std::string("fork: ") + strerror(errno);
      close(fds[0]);
      close(fds[1]);
      return false;
    }
    if (pid == 0) exec_child(s, fds[1], pgid_, launcher);
    if (pgid_ == 0) pgid_ = pid;
    setpgid(pid, pgid_);  // also in the parent: no race with an early kill
    close(fds[1]);
    running_.push_back(Running{s.rank, pid, fds[0], {}, false});
    return true;
  }

  void poll_once() {
    std::vector<pollfd> fds;
    std::vector<Running*> owners;
    for (auto& r : running_)
      if (r.fd >= 0) {
        fds.push_back(pollfd{r.fd, POLLIN, 0});
        owners.push_back(&r);
      }
    if (g_signal_pipe[0] >= 0) fds.push_back(pollfd{g_signal_pipe[0], POLLIN, 0});
    int n = poll(fds.data(), fds.size(), exit_expected_soon() ? 1 : 50);
    if (n <= 0) return;
    for (size_t i = 0; i < owners.size(); ++i)
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_from(*owners[i]);
    if (g_signal_pipe[0] >= 0 && (fds.back().revents & POLLIN)) {
      unsigned char sig = 0;
      while (read(g_signal_pipe[0], &sig, 1) == 1) {
        if (!result_.interrupted) {
          result_.interrupted = true;
          result_.interrupt_signal = sig;
          // SIGHUP means the terminal went away, not "hang up the ranks": they get SIGTERM
          // and their grace period, as for a SIGTERM to the launcher.
          begin_shutdown(sig == SIGHUP ? SIGTERM : sig);
        }
      }
    }
  }

  // A rank that exits closes its pipe (exit_files) a moment before the kernel makes its exit
  // status available (exit_notify): with nothing left to wake poll, a full 50 ms wait for
  // that moment made a 64-rank launch of /bin/true 35 or 85 ms at random. Only for a moment:
  // a rank that closed or redirected its output and runs on must not cost a wake-up every
  // millisecond for the rest of the job.
  bool exit_expected_soon() const {
    auto now = Clock::now();
    for (const auto& r : running_)
      if (r.fd < 0 && !r.exited && now - r.closed_at < std::chrono::milliseconds(100)) return true;
    return false;
  }

  void read_from(Running& r) {
    char buf[65536];
    ssize_t n = read(r.fd, buf, sizeof buf);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) return;
      flush_partial(r);
      close(r.fd);
      r.fd = -1;
      r.closed_at = Clock::now();
      return;
    }
    // Linear in the output: only the new bytes are searched for newlines, and a "line" that
    // never ends is passed on in pieces of kMaxLineBytes (memory stays bounded).
    size_t searched = r.partial.size();
    r.partial.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t pos = r.partial.find('\n', searched); pos != std::string::npos;
         pos = r.partial.find('\n', start)) {
      sink_(r.rank, r.partial.substr(start, pos - start));
      start = pos + 1;
    }
    r.partial.erase(0, start);
    while (r.partial.size() >= kMaxLineBytes) {
      sink_(r.rank, r.partial.substr(0, kMaxLineBytes));
      r.partial.erase(0, kMaxLineBytes);
    }
  }

  void flush_partial(Running& r) {
    if (!r.partial.empty()) sink_(r.rank, r.partial);
    r.partial.clear();
  }

  void reap() {
    for (auto& r : running_) {
      if (r.exited) continue;
      int status = 0;
      pid_t got = waitpid(r.pid, &status, WNOHANG);
      if (got != r.pid) continue;
      r.exited = true;
      r.exited_at = Clock::now();
      RankOutcome o{r.rank, 0, 0, false};
      if (WIFSIGNALED(status)) {
        o.signaled = true;
        o.signal = WTERMSIG(status);
      } else {
        o.exit_code = WEXITSTATUS(status);
      }
      result_.ranks.push_back(o);
      if (!o.ok() && !shutting_down_) {
        result_.first_failure = o;
        begin_shutdown(SIGTERM);
      }
    }
  }

  void enforce_deadlines() {
    auto now = Clock::now();
    if (options_.timeout.count() > 0 && !shutting_down_ && now - start_ > options_.timeout) {
      result_.timed_out = true;
      begin_shutdown(SIGTERM);
    }
    if (options_.stop_requested && !shutting_down_ && options_.stop_requested()) {
      result_.stopped_on_request = true;
      begin_shutdown(SIGTERM);
    }
    if (shutting_down_ && !killed_ && now - shutdown_at_ > options_.grace) {
      kill(-pgid_, SIGKILL);
      killed_ = true;
    }
    // Processes that left the group's pipes open (daemons) must not keep us alive forever:
    // a rank's pipe is read for a short while after its exit, then closed.
    for (auto& r : running_) {
      bool drained = r.exited && now - r.exited_at > kDrainAfterExit;
      bool after_kill = killed_ && now - shutdown_at_ > options_.grace + kDrainAfterExit;
      if (r.fd >= 0 && r.exited && (drained || after_kill)) {
        flush_partial(r);
        close(r.fd);
        r.fd = -1;
      }
    }
  }

  void begin_shutdown(int sig) {
    if (shutting_down_ || pgid_ == 0) {
      if (pgid_ == 0) killed_ = shutting_down_ = true;
      return;
    }
    shutting_down_ = true;
    shutdown_at_ = Clock::now();
    kill(-pgid_, sig);
  }

  bool all_exited() {
    for (const auto& r : running_)
      if (!r.exited || r.fd >= 0) return false;
    // Grandchildren left in the group: kill them and give the kernel a moment (bounded:
    // zombies nobody reaps would otherwise keep the group "alive" forever).
    if (pgid_ != 0 && kill(-pgid_, 0) == 0 && leftover_checks_++ < 20) {
      kill(-pgid_, SIGKILL);
      poll(nullptr, 0, 50);
      return false;
    }
    return true;
  }

  // After the ranks: every live child left is a process the job started outside its group
  // (re-parented here by the subreaper). SIGTERM, then SIGKILL after a short grace; a
  // killed parent's own children arrive next round, so this repeats until none is left.
  void stop_leftovers() {
    const pid_t self = getpid();
    auto term_deadline = Clock::now() + std::chrono::seconds(1);
    for (int round = 0; round < 200; ++round) {
      reap_any_children();
      std::vector<pid_t> kids = live_children_of(self);
      if (kids.empty()) return;
      bool still_terminating = Clock::now() < term_deadline;
      for (pid_t kid : kids) {
        if (round == 0) ++result_.leftovers_stopped;
        kill(kid, still_terminating ? SIGTERM : SIGKILL);
      }
      poll(nullptr, 0, 20);
    }
  }

  const GroupOptions& options_;
  const LineSink& sink_;
  GroupResult result_;
  std::vector<Running> running_;
  pid_t pgid_ = 0;
  bool shutting_down_ = false;
  bool killed_ = false;
  int leftover_checks_ = 0;
  Clock::time_point start_;
  Clock::time_point shutdown_at_;
};

}  // namespace

GroupResult run_process_group(const std::vector<RankSpec>& ranks, const GroupOptions& options,
                              const LineSink& sink) {
  SignalGuard guard;
  std::optional<SubreaperGuard> subreaper;
  GroupOptions effective = options;
  if (options.subreaper) {
    subreaper.emplace();
    effective.subreaper = subreaper->active();
  }
  GroupRunner runner(effective, sink);
  GroupResult result = runner.run(ranks);
  result.leftovers_tracked = effective.subreaper;
  return result;
}

}  // namespace bridge
