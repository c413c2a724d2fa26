// Test helpers: run a command as a subprocess and capture its exit code, stdout and stderr.
//
//   CommandResult r = run_command({BRIDGE_LAUNCH_BIN, "--version"});
//   EXPECT_EQ(r.exit_code, 0);
//
// The child inherits the test's environment plus `extra_env` (which wins), reads `stdin_text`
// on its standard input, and has NO_COLOR=1 set so output is plain. exit_code is the process
// exit status, or 128 + signal number when the child was killed by a signal (like a shell),
// or -1 when it could not be started. Header-only so that any test file can include it.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace bridge::test {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline CommandResult run_command(const std::vector<std::string>& argv,
                                 const std::map<std::string, std::string>& extra_env = {},
                                 const std::string& stdin_text = "") {
  CommandResult result;
  if (argv.empty()) return result;

  // Build argv / envp before forking (no allocation in the child).
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::map<std::string, std::string> env_map;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env_map[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  env_map["NO_COLOR"] = "1";
  for (const auto& [k, v] : extra_env) env_map[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env_map) env_strings.push_back(k + "=" + v);
  std::vector<char*> cenv;
  for (auto& s : env_strings) cenv.push_back(s.data());
  cenv.push_back(nullptr);

  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe(in_pipe) != 0) return result;
  if (pipe(out_pipe) != 0) {
    close(in_pipe[0]);
    close(in_pipe[1]);
    return result;
  }
  if (pipe(err_pipe) != 0) {
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1]}) close(fd);
    return result;
  }

  pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]})
      close(fd);
    return result;
  }
  if (pid == 0) {
    dup2(in_pipe[0], STDIN_FILENO);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]})
      close(fd);
    execve(cargv[0], cargv.data(), cenv.data());
    // exec failed: report like a shell does.
    const char msg[] = "run_command: exec failed\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof(msg) - 1);
    (void)ignored;
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);

  // Feed stdin, drain stdout/stderr without deadlocking on full pipes.
  signal(SIGPIPE, SIG_IGN);
  size_t written = 0;
  int in_fd = in_pipe[1];
  if (stdin_text.empty()) {
    close(in_fd);
    in_fd = -1;
  } else {
    fcntl(in_fd, F_SETFL, fcntl(in_fd, F_GETFL) | O_NONBLOCK);
  }
  int out_fd = out_pipe[0], err_fd = err_pipe[0];
  char buf[65536];
  while (out_fd >= 0 || err_fd >= 0 || in_fd >= 0) {
    std::vector<pollfd> fds;
    if (out_fd >= 0) fds.push_back({out_fd, POLLIN, 0});
    if (err_fd >= 0) fds.push_back({err_fd, POLLIN, 0});
    if (in_fd >= 0) fds.push_back({in_fd, POLLOUT, 0});
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (const auto& p : fds) {
      if (p.revents == 0) continue;
      if (p.fd == in_fd) {
        ssize_t n = write(in_fd, stdin_text.data() + written, stdin_text.size() - written);
        if (n > 0) written += static_cast<size_t>(n);
        if (n < 0 && errno != EAGAIN && errno != EINTR) written = stdin_text.size();
        if (written >= stdin_text.size()) {
          close(in_fd);
          in_fd = -1;
        }
        continue;
      }
      ssize_t n = read(p.fd, buf, sizeof(buf));
      if (n > 0) {
        (p.fd == out_fd ? result.out : result.err).append(buf, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        close(p.fd);
        (p.fd == out_fd ? out_fd : err_fd) = -1;
      }
    }
  }

  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return result;
  }
  if (WIFEXITED(status))
    result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    result.exit_code = 128 + WTERMSIG(status);
  return result;
}

// A fresh empty directory under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "bridge-test-XXXXXX").string();
    if (mkdtemp(tmpl.data())) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes `content` (bytes as given) to `name` inside the directory; returns the full path.
  std::string write(const std::string& name, const std::string& content) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace bridge::test
