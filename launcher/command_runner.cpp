// The only file that starts scheduler commands (posix_spawn); nothing here throws.
#include "launcher/command_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "launcher/host_env.h"

namespace bridge {

namespace {

using Clock = std::chrono::steady_clock;

// After the program exited, how long its pipes are still read: a process it left behind
// (`daemon &`) may hold them open for ever.
constexpr auto kDrainAfterExit = std::chrono::milliseconds(200);

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

// A program that could not be started: finish reports why.
class NotStarted : public StartedCommand {
 public:
  explicit NotStarted(std::string why) { result_.started = false, result_.err = std::move(why); }
  CommandResult finish(const std::string&) override { return result_; }

 private:
  CommandResult result_;
};

// CommandRunner::start's default: nothing runs before finish.
class DeferredCommand : public StartedCommand {
 public:
  DeferredCommand(CommandRunner& runner, CommandSpec spec)
      : runner_(runner), spec_(std::move(spec)) {}
  CommandResult finish(const std::string& stdin_text) override {
    spec_.stdin_text = stdin_text;
    return runner_.run(spec_);
  }

 private:
  CommandRunner& runner_;
  CommandSpec spec_;
};

// A running child whose stdin is an open pipe that nothing was written to yet.
class SpawnedCommand : public StartedCommand {
 public:
  SpawnedCommand(pid_t pid, int in, int out, int err, std::chrono::milliseconds timeout)
      : pid_(pid), in_(in), out_(out), err_(err), timeout_(timeout) {
    // Readable when the program has ended: its end wakes poll like its output does. Without
    // one (kernels before 5.3) the loop looks every millisecond.
    exit_fd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
    // A command that does not read its stdin must not kill us with SIGPIPE.
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, &old_pipe_);
    for (int fd : {in_, out_, err_}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  ~SpawnedCommand() override {
    if (!reaped_) {  // unfinished: killed before it read any input
      kill(pid_, SIGKILL);
      reap(true);
    }
    for (int* fd : {&in_, &out_, &err_, &exit_fd_}) close_fd(*fd);
    sigaction(SIGPIPE, &old_pipe_, nullptr);
  }
  SpawnedCommand(const SpawnedCommand&) = delete;
  SpawnedCommand& operator=(const SpawnedCommand&) = delete;

  CommandResult finish(const std::string& stdin_text) override {
    CommandResult result;
    const auto deadline = Clock::now() + timeout_;
    std::optional<Clock::time_point> exited_at;
    size_t written = 0;
    bool poll_failed = false;
    if (stdin_text.empty()) close_fd(in_);
    for (;;) {
      auto now = Clock::now();
      if (now >= deadline) break;
      if (!reaped_ && exit_fd_ < 0) reap(false);  // no pidfd: look at each turn
      if (reaped_ && !exited_at) exited_at = now;
      if (reaped_ && out_ < 0 && err_ < 0) break;
      if (exited_at && now - *exited_at > kDrainAfterExit) break;
      std::vector<pollfd> fds;
      if (in_ >= 0) fds.push_back({in_, POLLOUT, 0});
      if (out_ >= 0) fds.push_back({out_, POLLIN, 0});
      if (err_ >= 0) fds.push_back({err_, POLLIN, 0});
      if (!reaped_ && exit_fd_ >= 0) fds.push_back({exit_fd_, POLLIN, 0});
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
      long long slice = left.count() + 1;
      if (exited_at || exit_fd_ < 0) slice = std::min<long long>(slice, 1);
      if (poll(fds.data(), fds.size(), static_cast<int>(slice)) < 0 && errno != EINTR) {
        result.err = std::string("poll: ") + std::strerror(errno);
        poll_failed = true;
        break;
      }
      for (const pollfd& p : fds) {
        if (!p.revents) continue;
        if (p.fd == exit_fd_) {
          reap(false);
        } else if (p.fd == in_) {
          ssize_t n = write(in_, stdin_text.data() + written, stdin_text.size() - written);
          if (n > 0) written += static_cast<size_t>(n);
          if ((n < 0 && errno != EAGAIN && errno != EINTR) || written == stdin_text.size())
            close_fd(in_);  // all written, or the program closed its stdin (EPIPE)
        } else {
          read_into(p.fd == out_ ? out_ : err_, p.fd == out_ ? result.out : result.err);
        }
      }
    }
    close_fd(in_);
    if (!reaped_) {
      kill(pid_, SIGKILL);
      reap(true);
      result.timed_out = !poll_failed;
      result.exit_code = 128 + SIGKILL;
      return result;
    }
    result.exit_code = exit_code_;
    return result;
  }

 private:
  // Reads what is there, at most 1 MiB a call (so that a program writing without pause
  // cannot keep the loop from its time limit); closes `fd` at end of file or on an error.
  static void read_into(int& fd, std::string& into) {
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
      return reaped_ = true;
    }
    if (r != pid_) return false;
    reaped_ = true;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
  }

  pid_t pid_;
  int in_, out_, err_;
  int exit_fd_ = -1;
  std::chrono::milliseconds timeout_;
  struct sigaction old_pipe_ {};
  bool reaped_ = false;
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

std::unique_ptr<StartedCommand> SpawnCommandRunner::start(const CommandSpec& spec) {
  if (spec.argv.empty()) return std::make_unique<NotStarted>("empty command");
  PipeSet pipes;
  if (!make_pipe(pipes.in) || !make_pipe(pipes.out) || !make_pipe(pipes.err))
    return std::make_unique<NotStarted>(std::string("pipe: ") + std::strerror(errno));
  std::vector<std::string> env = child_environment(spec.extra_env);
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipes.in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipes.out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipes.err[1], STDERR_FILENO);
  // The launcher ignores SIGPIPE; the program gets the default, as from a shell.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  short flags = POSIX_SPAWN_SETSIGDEF;
  if (spec.own_process_group) {
    posix_spawnattr_setpgroup(&attr, 0);
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  posix_spawnattr_setflags(&attr, flags);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    bool searched = spec.argv[0].find('/') == std::string::npos;
    return std::make_unique<NotStarted>(rc == ENOENT && searched
                                            ? spec.argv[0] + ": command not found"
                                            : spec.argv[0] + ": " + std::strerror(rc));
  }
  auto started =
      std::make_unique<SpawnedCommand>(pid, pipes.in[1], pipes.out[0], pipes.err[0], spec.timeout);
  pipes.in[1] = pipes.out[0] = pipes.err[0] = -1;  // owned by `started` now
  return started;
}

CommandResult SpawnCommandRunner::run(const CommandSpec& spec) {
  return start(spec)->finish(spec.stdin_text);
}

}  // namespace bridge
