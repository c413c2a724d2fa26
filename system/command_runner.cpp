// The only file that starts scheduler commands (posix_spawn); nothing leaves it as an
// exception.
#include "system/command_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "system/host_env.h"

namespace bridge {

namespace {

using Clock = std::chrono::steady_clock;

// After the program exited, how long its pipes are still read: a process it left behind
// (`daemon &`) may hold them open for ever.
constexpr auto kDrainAfterExit = std::chrono::milliseconds(200);
// How often a cancel token without an eventfd (system/cancel_token.h) is looked at.
constexpr long long kCancelLookMs = 100;

// "NAME=VALUE" strings: the inherited environment with `extra` added (extra wins). A name
// the environment holds twice is passed once, with its first value, as getenv reads it.
std::vector<std::string> child_environment(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  std::set<std::string> seen;
  for (const auto& [name, value] : ProcessEnvironment().all())
    if (!extra.count(name) && seen.insert(name).second) env.push_back(name + "=" + value);
  for (const auto& [name, value] : extra) env.push_back(name + "=" + value);
  return env;
}

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// One pipe; both ends close on exec, and neither is 0, 1 or 2 (dup2 onto the same number
// would keep close-on-exec set, and the child would start without that stream).
bool make_pipe(std::array<int, 2>& fds) {
  if (pipe2(fds.data(), O_CLOEXEC) != 0) return false;
  for (int& fd : fds) {
    if (fd > 2) continue;
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    close(fd);
    fd = moved;
    if (fd < 0) return false;
  }
  return true;
}

// The process groups of the programs running now (0: a free slot), for forward_to_groups.
// Every program leads a group of its own, out of reach of the terminal's Ctrl-C. More than
// kMostWatched at once (bridge-launch runs one or two) are killed at their end only.
constexpr size_t kMostWatched = 32;
std::array<std::atomic<pid_t>, kMostWatched> g_watched{};
std::atomic<int> g_watched_count{0};
constexpr std::array<int, 3> kPassedOn = {SIGINT, SIGTERM, SIGHUP};

// Installed for SIGINT, SIGTERM and SIGHUP only where their action was the default (ending
// the launcher): gives the signal to each running program's group, as the terminal would
// have had the programs shared the launcher's group, then ends the launcher as the default
// action does. Async-signal-safe: atomic loads, kill, sigaction, raise.
void forward_to_groups(int sig) {
  for (auto& slot : g_watched)
    if (pid_t group = slot.load(); group > 0) kill(-group, sig);
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigaction(sig, &fallback, nullptr);
  raise(sig);  // blocked inside this handler: delivered, with its default action, on return
}

// Starts passing the signals on to `group` (called once it was spawned, before anything can
// kill it, so that its pid is not recycled while it is listed).
void watch_group(pid_t group) {
  for (auto& slot : g_watched)
    if (pid_t empty = 0; slot.compare_exchange_strong(empty, group)) break;
  if (g_watched_count.fetch_add(1) != 0) return;
  struct sigaction forward {};
  forward.sa_handler = forward_to_groups;
  for (int sig : kPassedOn) {
    struct sigaction now {};
    // A handler the launcher set (the `--wait` loop's, the ranks' process group) decides
    // itself; a blocked signal (a submission defers Ctrl-C) never reaches this one.
    if (sigaction(sig, nullptr, &now) == 0 && now.sa_handler == SIG_DFL &&
        !(now.sa_flags & SA_SIGINFO))
      sigaction(sig, &forward, nullptr);
  }
}

// Stops passing the signals on to `group` (called before it is reaped); the last one puts
// the default actions back where forward_to_groups still holds them.
void unwatch_group(pid_t group) {
  for (auto& slot : g_watched)
    if (pid_t listed = group; slot.compare_exchange_strong(listed, 0)) break;
  if (g_watched_count.fetch_sub(1) != 1) return;
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  for (int sig : kPassedOn) {
    struct sigaction now {};
    if (sigaction(sig, nullptr, &now) == 0 && now.sa_handler == forward_to_groups)
      sigaction(sig, &fallback, nullptr);
  }
}

// One stream of a program's output, kept bounded: the first half of kMaxCapturedOutput in
// `head` (the caller's string, which until_line reads as it grows), the last half in a tail
// that drops its front as it grows; finish() joins them around a line that says so.
class BoundedCapture {
 public:
  explicit BoundedCapture(std::string& head) : head_(head) {}

  void append(const char* data, size_t n) {
    size_t to_head = std::min(n, kHalf - std::min(kHalf, head_.size()));
    head_.append(data, to_head);
    if (to_head == n) return;
    tail_.append(data + to_head, n - to_head);
    // Dropping the front only once it is as long as what is kept: each byte is moved at
    // most once more, so the cost stays linear in what the program writes.
    if (tail_.size() >= 2 * kHalf) {
      cut_ += tail_.size() - kHalf;
      tail_.erase(0, tail_.size() - kHalf);
    }
  }

  // The bytes left out (0 when nothing was).
  size_t finish() {
    if (tail_.size() > kHalf) {
      cut_ += tail_.size() - kHalf;
      tail_.erase(0, tail_.size() - kHalf);
    }
    if (cut_ > 0)
      head_ += "\n[... output cut at " + std::to_string(kMaxCapturedOutput) +
               " bytes: " + std::to_string(cut_) + " bytes left out here ...]\n";
    head_ += tail_;
    tail_.clear();
    tail_.shrink_to_fit();
    return cut_;
  }

 private:
  static constexpr size_t kHalf = kMaxCapturedOutput / 2;
  std::string& head_;
  std::string tail_;
  size_t cut_ = 0;
};

// A program that could not be started: finish reports why.
class NotStarted : public StartedCommand {
 public:
  explicit NotStarted(std::string why) { result_.started = false, result_.err = std::move(why); }
  CommandResult finish(const std::string&, const WhileRunning&) override { return result_; }

 private:
  CommandResult result_;
};

// CommandRunner::start's default: nothing runs before finish.
class DeferredCommand : public StartedCommand {
 public:
  DeferredCommand(CommandRunner& runner, CommandSpec spec)
      : runner_(runner), spec_(std::move(spec)) {}
  // The input is complete before the command runs, so `input_given` runs first; the output
  // exists only once it ended, so the lines come last.
  CommandResult finish(const std::string& stdin_text, const WhileRunning& while_running) override {
    spec_.stdin_text = stdin_text;
    if (while_running.input_given) while_running.input_given();
    CommandResult result = runner_.run(spec_);
    size_t from = 0;
    if (while_running.until_line && result.started)
      for (size_t eol; (eol = result.out.find('\n', from)) != std::string::npos; from = eol + 1)
        if (while_running.until_line(result.out.substr(from, eol - from))) break;
    return result;
  }

 private:
  CommandRunner& runner_;
  CommandSpec spec_;
};

// A running child whose stdin is an open pipe that nothing was written to yet.
class SpawnedCommand : public StartedCommand {
 public:
  SpawnedCommand(pid_t pid, int in, int out, int err, std::chrono::milliseconds timeout,
                 const CancelToken* cancel)
      : pid_(pid), in_(in), out_(out), err_(err), timeout_(timeout), cancel_(cancel) {
    // Readable when the program has ended: its end wakes poll like its output does. Without
    // one (kernels before 5.3) the loop looks every millisecond.
    exit_fd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
    // A command that does not read its stdin must not kill us with SIGPIPE.
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, &old_pipe_);
    for (int fd : {in_, out_, err_}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    watch_group(pid_);
  }
  ~SpawnedCommand() override {
    if (left_) {  // found what the caller waited for: left to end on its own
      if (!reap(false)) unwatch_group(pid_);
    } else if (!reaped_) {  // unfinished: killed before it read any input
      kill_program();
      reap(true);
    }
    for (int* fd : {&in_, &out_, &err_, &exit_fd_}) close_fd(*fd);
    sigaction(SIGPIPE, &old_pipe_, nullptr);
  }
  SpawnedCommand(const SpawnedCommand&) = delete;
  SpawnedCommand& operator=(const SpawnedCommand&) = delete;

  CommandResult finish(const std::string& stdin_text, const WhileRunning& while_running) override {
    CommandResult result;
    BoundedCapture out_kept(result.out), err_kept(result.err);
    auto deadline = Clock::now() + timeout_;
    std::optional<Clock::time_point> exited_at;
    size_t written = 0;
    bool poll_failed = false;
    bool cancelled = false;
    bool told = false;
    size_t lines_from = 0;  // where the next line not yet given to until_line starts
    bool lines_done = !while_running.until_line;
    // The caller's work does not count against the program's time limit.
    auto unclocked = [&](const auto& work) {
      auto before = Clock::now();
      work();
      deadline += Clock::now() - before;
    };
    auto tell_once_closed = [&]() {
      if (in_ >= 0 || told) return;
      told = true;
      if (while_running.input_given) unclocked(while_running.input_given);
    };
    auto tell_lines = [&]() {
      for (size_t eol;
           told && !lines_done && (eol = result.out.find('\n', lines_from)) != std::string::npos;) {
        std::string line = result.out.substr(lines_from, eol - lines_from);
        lines_from = eol + 1;
        unclocked([&]() { lines_done = while_running.until_line(line); });
      }
    };
    fit_pipe_to(stdin_text.size());
    if (stdin_text.empty()) close_fd(in_);
    tell_once_closed();
    for (;;) {
      auto now = Clock::now();
      if (now >= deadline) break;
      // Cancelled (Ctrl-C during --wait): the program is killed as on a timeout. One that
      // already ended (reaped now if its pidfd was not read yet) keeps its result.
      if (!reaped_ && cancel_ && cancel_->cancelled()) {
        reap(false);
        if (!reaped_) {
          cancelled = true;
          break;
        }
      }
      if (!reaped_ && exit_fd_ < 0) reap(false);  // no pidfd: look at each turn
      if (reaped_ && !exited_at) exited_at = now;
      if (reaped_ && out_ < 0 && err_ < 0) break;
      if (exited_at && now - *exited_at > kDrainAfterExit) break;
      std::vector<pollfd> fds;
      if (in_ >= 0) fds.push_back({in_, POLLOUT, 0});
      if (out_ >= 0) fds.push_back({out_, POLLIN, 0});
      if (err_ >= 0) fds.push_back({err_, POLLIN, 0});
      if (!reaped_ && exit_fd_ >= 0) fds.push_back({exit_fd_, POLLIN, 0});
      // Only looked at (cancelled() above): reading it would undo the cancel for later runs.
      if (!reaped_ && cancel_ && cancel_->fd() >= 0) fds.push_back({cancel_->fd(), POLLIN, 0});
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
      long long slice = left.count() + 1;
      if (exited_at || exit_fd_ < 0) slice = std::min<long long>(slice, 1);
      if (cancel_ && cancel_->fd() < 0) slice = std::min(slice, kCancelLookMs);
      if (poll(fds.data(), fds.size(), static_cast<int>(slice)) < 0 && errno != EINTR) {
        result.err = std::string("poll: ") + std::strerror(errno);
        poll_failed = true;
        break;
      }
      for (const pollfd& p : fds) {
        if (!p.revents) continue;
        if (p.fd == exit_fd_) {
          reap(false);
        } else if (cancel_ && p.fd == cancel_->fd()) {
          continue;  // the next turn ends the run
        } else if (p.fd == in_) {
          ssize_t n = write(in_, stdin_text.data() + written, stdin_text.size() - written);
          if (n > 0) written += static_cast<size_t>(n);
          if ((n < 0 && errno != EAGAIN && errno != EINTR) || written == stdin_text.size())
            close_fd(in_);  // all written, or the program closed its stdin (EPIPE)
          tell_once_closed();
          tell_lines();  // lines written before the input was all given
        } else {
          read_into(p.fd == out_ ? out_ : err_, p.fd == out_ ? out_kept : err_kept);
          tell_lines();
        }
      }
      if (lines_done && while_running.until_line && while_running.leave_when_found && !reaped_) {
        if (err_ >= 0) read_into(err_, err_kept);  // what it said before: nothing waits
        left_ = true;
        break;
      }
    }
    close_fd(in_);
    result.out_cut = out_kept.finish();
    result.err_cut = err_kept.finish();
    if (left_) {
      result.left_running = true;
      return result;
    }
    if (!reaped_) {
      kill_program();
      reap(true);
      result.cancelled = cancelled;
      result.timed_out = !poll_failed && !cancelled;
      result.exit_code = 128 + SIGKILL;
      return result;
    }
    result.exit_code = exit_code_;
    return result;
  }

 private:
  // Makes the stdin pipe hold `size` bytes, so that poll reports it writable and one write()
  // takes it all: a launcher killed at any moment has given the program the whole input or
  // none of it. Linux gives a pipe 64 KiB (one page once the user's pipes exceed
  // /proc/sys/fs/pipe-user-pages-soft) and lets an unprivileged process grow it up to
  // /proc/sys/fs/pipe-max-size (1 MiB by default). Best effort: a pipe that cannot grow gets
  // the input in pieces.
  void fit_pipe_to(size_t size) const {
    constexpr size_t kMostWeAsk = 1 << 20;
    if (in_ < 0 || size == 0 || size > kMostWeAsk) return;
    int now = fcntl(in_, F_GETPIPE_SZ);
    if (now < 0 || static_cast<size_t>(now) < size)
      fcntl(in_, F_SETPIPE_SZ, static_cast<int>(size));
  }

  // Reads what is there, at most 1 MiB a call (so that a program writing without pause
  // cannot keep the loop from its time limit); closes `fd` at end of file or on an error.
  static void read_into(int& fd, BoundedCapture& into) {
    char buf[16384];
    for (int chunk = 0; chunk < 64; ++chunk) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n > 0) {
        into.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      close_fd(fd);
      return;
    }
  }

  // True once the program has ended (its exit code kept); `block` waits for it.
  bool reap(bool block) {
    int status = 0;
    pid_t r;
    do {
      r = waitpid(pid_, &status, block ? 0 : WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r < 0) {  // not our child any more (ECHILD): its exit status is lost
      exit_code_ = 128 + SIGKILL;
      unwatch_group(pid_);
      return reaped_ = true;
    }
    if (r != pid_) return false;
    // Its pid may be handed out again from now on: no signal may go to its group any more.
    unwatch_group(pid_);
    reaped_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
  }

  // SIGKILL to the program's process group: a hung client's children (a wrapper's sbatch,
  // the Python a --runtime-check script started) go with it. The program is not reaped yet,
  // so its pid, and the group it leads, cannot belong to anyone else. (The program itself
  // too, in case it left its group: setsid, setpgid.)
  void kill_program() const {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
  }

  pid_t pid_;
  int in_, out_, err_;
  int exit_fd_ = -1;
  std::chrono::milliseconds timeout_;
  const CancelToken* cancel_;
  struct sigaction old_pipe_ {};
  bool reaped_ = false;
  bool left_ = false;  // returned once the caller found its line (leave_when_found)
  int exit_code_ = 0;
};

// Closes every pipe end it owns unless released.
struct PipeSet {
  std::array<int, 2> in{-1, -1}, out{-1, -1}, err{-1, -1};
  ~PipeSet() {
    for (auto* p : {&in, &out, &err})
      for (int& fd : *p) close_fd(fd);
  }
};

}  // namespace

std::unique_ptr<StartedCommand> CommandRunner::start(const CommandSpec& spec) {
  return std::make_unique<DeferredCommand>(*this, spec);
}

namespace {

// The file posix_spawnp would run for `name` along $PATH (the launcher's own, as posix_spawnp
// reads it; unset: /bin:/usr/bin): the first regular file there this process may execute.
// Empty when `name` holds a '/' or no directory has it; posix_spawnp then searches and
// reports. Looked up here because posix_spawnp tries an execve in the child for every
// directory before the right one (50 us each, with the launcher held; a login shell's PATH
// often has ten entries ahead of /usr/bin: docs/performance.md).
std::string program_on_path(const std::string& name) {
  if (name.empty() || name.find('/') != std::string::npos) return "";
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "/bin:/usr/bin";
  while (true) {
    size_t colon = dirs.find(':');
    std::string_view dir = dirs.substr(0, colon);
    std::string candidate = std::string(dir.empty() ? "." : dir) + "/" + name;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        faccessat(AT_FDCWD, candidate.c_str(), X_OK, AT_EACCESS) == 0)
      return candidate;
    if (colon == std::string_view::npos) return "";
    dirs.remove_prefix(colon + 1);
  }
}

// Everything posix_spawn needs, owned: the child's ends of the pipes, its argv and
// environment, all built before `spawn`, which allocates nothing on the way to the exec.
struct SpawnRequest {
  PipeSet pipes;
  std::vector<std::string> argv, env;
  std::vector<char*> args, envp;  // pointers into argv and env
  std::string program;            // argv[0] found along $PATH; empty: posix_spawnp searches
  posix_spawn_file_actions_t actions{};
  posix_spawnattr_t attr{};
  bool built = false;

  SpawnRequest() = default;
  SpawnRequest(const SpawnRequest&) = delete;
  SpawnRequest& operator=(const SpawnRequest&) = delete;
  ~SpawnRequest() {
    if (!built) return;
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }

  // Once the pipes, argv and env are set.
  void build() {
    program = program_on_path(argv[0]);
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipes.in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, pipes.out[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, pipes.err[1], STDERR_FILENO);
    // Only 0, 1 and 2 reach the program: a file another thread opens meanwhile without
    // O_CLOEXEC (std::ifstream does) must not leak into it.
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    // The program starts as from a shell: nothing blocked and no signal ignored. The
    // launcher blocks INT/TERM/HUP while it submits and ignores SIGPIPE; inherited, that made
    // sbatch deaf to the runner's TERM and kept a hung client's children alive.
    posix_spawnattr_init(&attr);
    sigset_t defaults;
    sigemptyset(&defaults);
    for (int sig : {SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGALRM, SIGTERM, SIGCHLD, SIGUSR1, SIGUSR2,
                    SIGTSTP, SIGTTIN, SIGTTOU})
      sigaddset(&defaults, sig);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    // A group of its own, killed as one (kill_program): what the program starts goes with
    // it. The terminal's Ctrl-C then reaches the launcher only (see watch_group); while the
    // launcher submits it defers that Ctrl-C and it must not cut sbatch off half-way.
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(
        &attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
    built = true;
  }

  // posix_spawn's result (0 or an errno value); closes the child's pipe ends.
  int spawn(pid_t* pid) {
    int rc = program.empty()
                 ? ENOENT
                 : posix_spawn(pid, program.c_str(), &actions, &attr, args.data(), envp.data());
    // Not found, or found and not runnable (a script whose interpreter is missing, a busy or
    // foreign binary): posix_spawnp then searches on, as it always did.
    if (rc != 0) rc = posix_spawnp(pid, args[0], &actions, &attr, args.data(), envp.data());
    for (int* fd : {&pipes.in[0], &pipes.out[1], &pipes.err[1]}) close_fd(*fd);
    return rc;
  }

  std::string failure(int rc) const {
    bool searched = argv[0].find('/') == std::string::npos;
    return rc == ENOENT && searched ? argv[0] + ": command not found"
                                    : argv[0] + ": " + std::strerror(rc);
  }
};

// The request for `spec` (pipes made, environment read), or why there is none.
StatusOr<std::unique_ptr<SpawnRequest>> prepare_spawn(const CommandSpec& spec) {
  if (spec.argv.empty()) return Status::failed("empty command");
  auto req = std::make_unique<SpawnRequest>();
  if (!make_pipe(req->pipes.in) || !make_pipe(req->pipes.out) || !make_pipe(req->pipes.err))
    return Status::failed(std::string("pipe: ") + std::strerror(errno));
  req->argv = spec.argv;
  req->env = child_environment(spec.extra_env);
  req->build();
  return req;
}

std::unique_ptr<StartedCommand> started_command(SpawnRequest& req, pid_t pid,
                                                std::chrono::milliseconds timeout,
                                                const CancelToken* cancel) {
  auto started = std::make_unique<SpawnedCommand>(pid, req.pipes.in[1], req.pipes.out[0],
                                                  req.pipes.err[0], timeout, cancel);
  req.pipes.in[1] = req.pipes.out[0] = req.pipes.err[0] = -1;  // owned by `started` now
  return started;
}

// The CPU `pid` last ran on (/proc/PID/stat's 39th field), or -1.
int last_cpu_of(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[1024];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');  // the command name may hold spaces and parens
  if (!p) return -1;
  // Fields 3.. follow ") "; the CPU is field 39.
  int field = 2;
  for (; *p && field < 39; ++p)
    if (*p == ' ') ++field;
  return *p ? std::atoi(p) : -1;
}

// A program started to overlap the caller's work must run beside it. Linux puts a new process
// on its parent's CPU, and where it does not balance at fork (a VM whose two CPUs form no
// scheduling domain) the two then share that CPU while another idles, until a balancing tick
// milliseconds later. The caller moves instead: it takes an affinity without its current CPU
// (the kernel moves it at once) and gets its own mask back, so the program keeps the CPU it
// was started on and the program's affinity is never touched. (The mask given back is then
// the caller's own explicit choice: a cpuset widened later is not followed by this process,
// which ends with its command.)
void leave_the_cpu_to(pid_t child) {
  cpu_set_t mine;
  if (sched_getaffinity(0, sizeof mine, &mine) != 0 || CPU_COUNT(&mine) < 2) return;
  int here = sched_getcpu();
  if (here < 0 || here >= CPU_SETSIZE || !CPU_ISSET(here, &mine)) return;
  if (last_cpu_of(child) != here) return;
  cpu_set_t elsewhere = mine;
  CPU_CLR(here, &elsewhere);
  if (sched_setaffinity(0, sizeof elsewhere, &elsewhere) != 0) return;
  // The launcher must not keep the narrower mask: the ranks and programs it starts later
  // would inherit it. A mask the kernel refuses now (its cpuset changed in between) is asked
  // for again as the cpuset's own.
  if (sched_setaffinity(0, sizeof mine, &mine) != 0) {
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) CPU_SET(cpu, &all);
    sched_setaffinity(0, sizeof all, &all);  // the kernel narrows it to the allowed CPUs
  }
}

// The program of `spec` started, or what could not be started; `beside` moves the caller
// off the program's CPU (leave_the_cpu_to) for a start-up that overlaps the caller's work.
std::unique_ptr<StartedCommand> spawn_command(const CommandSpec& spec, const CancelToken* cancel,
                                              bool beside) {
  StatusOr<std::unique_ptr<SpawnRequest>> req = prepare_spawn(spec);
  if (!req.ok()) return std::make_unique<NotStarted>(req.why());
  SpawnRequest& request = **req;
  pid_t pid = -1;
  int rc = request.spawn(&pid);
  if (rc != 0) return std::make_unique<NotStarted>(request.failure(rc));
  if (beside) leave_the_cpu_to(pid);
  return started_command(request, pid, spec.timeout, cancel);
}

}  // namespace

// Spawned here, on the caller's thread: posix_spawn (vfork) holds the caller until the
// program's execve has begun, a few hundred microseconds, and the program's start-up then
// overlaps what the caller does before finish, on another CPU (leave_the_cpu_to). A thread of
// its own for the spawn was tried (docs/performance.md, round 8): the new thread shared the
// caller's CPU and often ran only once the caller blocked, milliseconds later.
std::unique_ptr<StartedCommand> SpawnCommandRunner::start(const CommandSpec& spec) {
  return spawn_command(spec, cancel_, /*beside=*/true);
}

// The caller waits for the program from the start: nothing to overlap, nobody moves.
CommandResult SpawnCommandRunner::run(const CommandSpec& spec) {
  return spawn_command(spec, cancel_, /*beside=*/false)->finish(spec.stdin_text, {});
}

}  // namespace bridge
