// Helpers for integration tests that run bridge-launch in the background and then signal it,
// wait for it, or look for processes it may have left behind. Shared by the local and Slurm
// suites. Everything polls in 100 ms steps with a bound, so a broken build fails the test
// instead of hanging it.
#ifndef BRIDGE_TESTS_INTEGRATION_PROCESS_UTIL_H_
#define BRIDGE_TESTS_INTEGRATION_PROCESS_UTIL_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/test_util.h"

namespace bridge::test {

// A TCP port nobody listens on right now (the kernel's choice for an ephemeral bind).
inline int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// Processes (not zombies) whose command line mentions `marker`.
inline std::vector<pid_t> processes_with(const std::string& marker) {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = read_file(e.path() / "cmdline");
    std::string stat = read_file(e.path() / "stat");
    if (stat.find(") Z") != std::string::npos) continue;  // zombies are already dead
    if (cmdline.find(marker) != std::string::npos) pids.push_back(std::stoi(name));
  }
  return pids;
}

// Starts argv[0] (an absolute path) in the background with stdout and stderr going to
// `out`; `env` is added to the inherited environment. Returns the child's pid.
inline pid_t start_background(const std::vector<std::string>& argv,
                              const std::map<std::string, std::string>& env,
                              const std::filesystem::path& out) {
  pid_t pid = fork();
  if (pid == 0) {
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    execv(a[0], a.data());
    _exit(127);
  }
  return pid;
}

inline bool wait_for_text(const std::filesystem::path& file, const std::string& text, int seconds) {
  for (int i = 0; i < seconds * 10; ++i) {
    if (read_file(file).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// The child's exit code (128+N for signal N), or -1 after killing it when it outlives
// `seconds`.
inline int wait_exit(pid_t pid, int seconds) {
  for (int i = 0; i < seconds * 10; ++i) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

inline bool gone_within(const std::string& marker, int tenths) {
  for (int i = 0; i < tenths; ++i) {
    if (processes_with(marker).empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return processes_with(marker).empty();
}

}  // namespace bridge::test

#endif  // BRIDGE_TESTS_INTEGRATION_PROCESS_UTIL_H_
