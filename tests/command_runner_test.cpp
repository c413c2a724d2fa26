// The real scheduler-command runner (posix_spawn): output, stdin, env, exit codes,
// time-outs, no SIGPIPE death, a started command killed before its input, and programs
// that leave a process holding their pipes, and a cancelled run.
#include "system/command_runner.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "system/cancel_token.h"

namespace bridge {
namespace {

TEST(CommandRunnerTest, CapturesOutputStdinEnvAndExitCodes) {
  SpawnCommandRunner r;
  CommandSpec s;
  s.argv = {"/bin/sh", "-c", "cat; echo \"[$X]\" >&2; exit 3"};
  s.stdin_text = "in\n";
  s.extra_env = {{"X", "it's $x"}};
  CommandResult res = r.run(s);
  EXPECT_TRUE(res.started);
  EXPECT_FALSE(res.timed_out);
  EXPECT_EQ(res.exit_code, 3);
  EXPECT_EQ(res.out, "in\n");
  EXPECT_EQ(res.err, "[it's $x]\n");
  for (int i = 0; i < 50; ++i) {  // short commands are never mistaken for time-outs
    CommandSpec t;
    t.argv = {"true"};
    EXPECT_TRUE(r.run(t).ok());
  }
}

// The program is looked up along $PATH as posix_spawnp would (a directory or a file without
// the execute bit of that name is passed over), so what runs does not change.
TEST(CommandRunnerTest, AProgramIsFoundAlongPathPastDirectoriesAndFilesItCannotRun) {
  namespace fs = std::filesystem;
  fs::path root = fs::temp_directory_path() / ("bridge-path-" + std::to_string(getpid()));
  fs::create_directories(root / "a" / "tool-bridge");  // a directory of that name
  fs::create_directories(root / "b");
  fs::create_directories(root / "c");
  std::ofstream(root / "b" / "tool-bridge") << "#!/bin/sh\necho not-executable\n";
  std::ofstream(root / "c" / "tool-bridge") << "#!/bin/sh\necho \"c $1\"\n";
  fs::permissions(root / "c" / "tool-bridge", fs::perms::owner_all);
  const char* old = std::getenv("PATH");
  std::string saved = old ? old : "";
  setenv("PATH",
         ((root / "a").string() + ":" + (root / "b").string() + ":" + (root / "c").string() + ":" +
          saved)
             .c_str(),
         1);
  SpawnCommandRunner r;
  CommandSpec s;
  s.argv = {"tool-bridge", "x"};
  CommandResult res = r.run(s);
  setenv("PATH", saved.c_str(), 1);
  fs::remove_all(root);
  EXPECT_TRUE(res.ok()) << res.err;
  EXPECT_EQ(res.out, "c x\n");
}

TEST(CommandRunnerTest, NotFoundTimeoutAndIgnoredStdin) {
  SpawnCommandRunner r;
  CommandSpec s;
  s.argv = {"no-such-program-bridge"};
  CommandResult res = r.run(s);
  EXPECT_FALSE(res.started);
  EXPECT_NE(res.err.find("no-such-program-bridge"), std::string::npos);

  s.argv = {"sleep", "10"};
  s.timeout = std::chrono::milliseconds(200);
  res = r.run(s);
  EXPECT_TRUE(res.timed_out);
  EXPECT_FALSE(res.ok());

  // A program that exits without reading a large stdin must not kill us with SIGPIPE.
  s.argv = {"true"};
  s.timeout = std::chrono::milliseconds(5000);
  s.stdin_text = std::string(1 << 20, 'x');
  res = r.run(s);
  EXPECT_TRUE(res.ok());
}

TEST(CommandRunnerTest, LargeOutputOnBothStreamsAndASignalledExit) {
  SpawnCommandRunner r;
  CommandSpec s;
  // More than a pipe holds on each stream, written alternately: neither may block the other.
  s.argv = {"/bin/sh", "-c",
            "i=0; while [ $i -lt 2000 ]; do echo \"out $i 0123456789012345678901234567890123\"; "
            "echo \"err $i\" >&2; i=$((i+1)); done"};
  CommandResult res = r.run(s);
  ASSERT_TRUE(res.ok()) << res.err.substr(0, 200);
  // 40 bytes a line plus the digits of i: 10 one-digit, 90 two-, 900 three-, 1000 four-digit.
  EXPECT_EQ(res.out.size(), 2000u * 40 + 10 * 1 + 90 * 2 + 900 * 3 + 1000 * 4);
  EXPECT_NE(res.err.find("err 1999\n"), std::string::npos);

  s.argv = {"/bin/sh", "-c", "kill -TERM $$"};
  res = r.run(s);
  EXPECT_EQ(res.exit_code, 128 + SIGTERM);
  EXPECT_FALSE(res.ok());
}

TEST(CommandRunnerTest, AStartedCommandDestroyedBeforeItsInputNeverActsOnIt) {
  SpawnCommandRunner r;
  std::filesystem::path marker =
      std::filesystem::temp_directory_path() / ("bridge-runner-" + std::to_string(getpid()));
  std::filesystem::remove(marker);
  CommandSpec s;
  // Acts only on input it read, as sbatch does.
  s.argv = {"/bin/sh", "-c", "read line && echo \"$line\" > " + marker.string()};
  {
    auto started = r.start(s);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // it is waiting for stdin
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(std::filesystem::exists(marker)) << "a killed command acted on no input";

  auto started = r.start(s);
  CommandResult res = started->finish("given\n", {});
  EXPECT_TRUE(res.ok()) << res.err;
  std::ifstream in(marker);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "given");
  std::filesystem::remove(marker);
}

TEST(CommandRunnerTest, AProcessLeftHoldingThePipesDoesNotHoldTheRunner) {
  SpawnCommandRunner r;
  CommandSpec s;
  // The program prints and exits; the sleep it leaves behind keeps stdout and stderr open.
  s.argv = {"/bin/sh", "-c", "sleep 30 & echo done"};
  s.timeout = std::chrono::milliseconds(20000);
  auto t0 = std::chrono::steady_clock::now();
  CommandResult res = r.run(s);
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(res.ok()) << res.err;
  EXPECT_EQ(res.out, "done\n");
  EXPECT_LT(took, std::chrono::seconds(10)) << "waited for the process the program left behind";
}

// A path no file is at yet, for a callback under test to create.
std::filesystem::path fresh_marker(const std::string& what) {
  auto marker = std::filesystem::temp_directory_path() /
                ("bridge-runner-" + what + "-" + std::to_string(getpid()));
  std::filesystem::remove(marker);
  return marker;
}

// The shell loop of a program that goes on only once `marker` exists.
std::string wait_for(const std::filesystem::path& marker) {
  return "while [ ! -e " + marker.string() + " ]; do sleep 0.01; done";
}

// input_given runs while the program still runs: the program below waits for the marker the
// callback creates (a callback run only after the program's end would never let it end), and
// it reads nothing before the marker exists, so the whole 512 KiB input must already be in
// the pipe when stdin is closed (the pipe was grown to fit it; a 64 KiB pipe would block the
// write and the callback would never run).
TEST(CommandRunnerTest, InputGivenRunsOnceWhileTheProgramRunsWithTheWholeInputInThePipe) {
  SpawnCommandRunner r;
  auto marker = fresh_marker("given");
  CommandSpec s;
  s.argv = {"/bin/sh", "-c", wait_for(marker) + "; wc -c | tr -d ' '"};
  s.timeout = std::chrono::milliseconds(20000);
  const std::string input(512 * 1024, 'x');
  int calls = 0;
  auto started = r.start(s);
  WhileRunning while_running;
  while_running.input_given = [&]() {
    ++calls;
    std::ofstream(marker.string()) << "go";
  };
  CommandResult res = started->finish(input, while_running);
  EXPECT_TRUE(res.ok()) << res.err;
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(res.out, std::to_string(input.size()) + "\n");
  std::filesystem::remove(marker);

  // Not run for a program that never got its input (it could not be started).
  CommandSpec missing;
  missing.argv = {"bridge-no-such-program-xyz"};
  calls = 0;
  WhileRunning counted;
  counted.input_given = [&]() { ++calls; };
  counted.until_line = [&](const std::string&) { return ++calls > 0; };
  CommandResult none = r.start(missing)->finish("input", counted);
  EXPECT_FALSE(none.started);
  EXPECT_EQ(calls, 0);
}

// until_line gets each stdout line in order, once the input was given, until it returns true,
// while the program still runs: the program below prints a banner at once, reads its 2 MiB
// of input only 0.2 s later (so stdin is still open when the banner arrives: that line waits
// for input_given), prints the number the caller waits for and then waits for the marker the
// callback creates on it; a callback run only after the program's end would never let it end.
TEST(CommandRunnerTest, UntilLineGetsTheLinesWhileTheProgramRunsAfterTheInputWasGiven) {
  SpawnCommandRunner r;
  auto marker = fresh_marker("line");
  CommandSpec s;
  s.argv = {"/bin/sh", "-c",
            "echo banner; sleep 0.2; cat >/dev/null; echo 4242; echo second; " + wait_for(marker) +
                "; echo after"};
  s.timeout = std::chrono::milliseconds(20000);
  std::vector<std::string> events;
  WhileRunning while_running;
  while_running.input_given = [&]() { events.push_back("input given"); };
  while_running.until_line = [&](const std::string& line) {
    events.push_back("line " + line);
    bool number = line.find_first_not_of("0123456789") == std::string::npos;
    if (number) std::ofstream(marker.string()) << "go";
    return number;
  };
  CommandResult res = r.start(s)->finish(std::string(2 << 20, 'x'), while_running);
  EXPECT_TRUE(res.ok()) << res.err;
  EXPECT_EQ(events, (std::vector<std::string>{"input given", "line banner", "line 4242"}));
  EXPECT_EQ(res.out, "banner\n4242\nsecond\nafter\n");
  std::filesystem::remove(marker);

  // The runner that starts nothing before finish (test fakes) keeps the order.
  events.clear();
  CommandSpec quick;
  quick.argv = {"/bin/sh", "-c", "cat >/dev/null; echo banner; echo 77; echo more"};
  CommandResult deferred = r.CommandRunner::start(quick)->finish("x", while_running);
  EXPECT_TRUE(deferred.ok()) << deferred.err;
  EXPECT_EQ(events, (std::vector<std::string>{"input given", "line banner", "line 77"}));
  std::filesystem::remove(marker);
}

// leave_when_found: finish returns once until_line found its line, before the program ended,
// and the program is left to end on its own (not killed): it writes its marker after the
// caller returned. What it wrote on stderr before its line is kept.
TEST(CommandRunnerTest, LeaveWhenFoundReturnsAtTheLineAndLetsTheProgramEndOnItsOwn) {
  SpawnCommandRunner r;
  auto release = fresh_marker("release");
  auto ended = fresh_marker("ended");
  CommandSpec s;
  s.argv = {"/bin/sh", "-c",
            "cat >/dev/null; echo warned >&2; echo banner; echo 4343; " + wait_for(release) +
                "; echo done > " + ended.string()};
  s.timeout = std::chrono::milliseconds(20000);
  WhileRunning while_running;
  while_running.until_line = [](const std::string& line) { return line == "4343"; };
  while_running.leave_when_found = true;
  CommandResult res = r.start(s)->finish("input", while_running);
  EXPECT_TRUE(res.ok()) << res.err;
  EXPECT_TRUE(res.left_running);
  EXPECT_EQ(res.out, "banner\n4343\n");
  EXPECT_EQ(res.err, "warned\n") << "what it said on stderr before its line";
  EXPECT_FALSE(std::filesystem::exists(ended)) << "finish waited for the program's end";
  std::ofstream(release.string()) << "go";
  for (int i = 0; i < 1000 && !std::filesystem::exists(ended); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(std::filesystem::exists(ended)) << "the program left running was killed";

  // A program that never prints the line is waited for as before.
  CommandSpec other;
  other.argv = {"/bin/sh", "-c", "cat >/dev/null; echo nothing; exit 3"};
  CommandResult whole = r.start(other)->finish("x", while_running);
  EXPECT_FALSE(whole.left_running);
  EXPECT_EQ(whole.exit_code, 3);
  std::filesystem::remove(release);
  std::filesystem::remove(ended);
}

// start() may move the launcher off the CPU the program was started on (a new process
// shares its parent's CPU); neither the launcher nor the program keeps a changed affinity.
// Several starts, so that the move (which happens only when the program was put on the
// caller's CPU) is met on a machine with two CPUs or more.
TEST(CommandRunnerTest, StartLeavesTheCallersAndTheProgramsAffinityAsTheyWere) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  if (CPU_COUNT(&before) < 2) GTEST_SKIP() << "one CPU: start() never moves the caller";
  std::ifstream self("/proc/self/status");
  std::string line, mine;
  while (std::getline(self, line))
    if (line.rfind("Cpus_allowed_list", 0) == 0) mine = line + "\n";
  SpawnCommandRunner r;
  CommandSpec s;
  s.argv = {"/bin/sh", "-c", "cat >/dev/null; grep '^Cpus_allowed_list' /proc/self/status"};
  for (int i = 0; i < 8; ++i) {
    auto started = r.start(s);
    cpu_set_t after;
    ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
    EXPECT_TRUE(CPU_EQUAL(&before, &after)) << "the launcher kept a changed affinity";
    CommandResult res = started->finish("x", {});
    ASSERT_TRUE(res.ok()) << res.err;
    EXPECT_EQ(res.out, mine) << "the program started with another affinity than the launcher's";
  }
}

// /proc/self/status's mask line `field` (SigBlk, SigIgn) of `out`, as a number.
unsigned long long signal_mask(const std::string& out, const std::string& field) {
  size_t at = out.find(field + ":");
  if (at == std::string::npos) return ~0ULL;
  return std::stoull(out.substr(at + field.size() + 1), nullptr, 16);
}

// The launcher blocks INT/TERM (and CHLD, HUP) while it submits and ignores some signals; a
// scheduler client must start as from a shell, or a TERM from the runner (or the user)
// never reaches it. Both ways of starting are checked.
TEST(CommandRunnerTest, ProgramsStartWithNoSignalBlockedOrIgnored) {
  sigset_t blocked, old;
  sigemptyset(&blocked);
  for (int sig : {SIGINT, SIGTERM, SIGCHLD, SIGHUP}) sigaddset(&blocked, sig);
  pthread_sigmask(SIG_BLOCK, &blocked, &old);
  struct sigaction ignore {
  }, old_int{}, old_term{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGTERM, &ignore, &old_term);
  SpawnCommandRunner r;
  CommandSpec s;
  s.argv = {"/bin/sh", "-c", "grep -E '^Sig(Blk|Ign):' /proc/self/status"};
  CommandResult ran = r.run(s);
  CommandResult started = r.start(s)->finish("", {});
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  const unsigned long long int_term = (1ULL << (SIGINT - 1)) | (1ULL << (SIGTERM - 1));
  for (const CommandResult* res : {&ran, &started}) {
    ASSERT_TRUE(res->ok()) << res->err;
    EXPECT_EQ(signal_mask(res->out, "SigBlk"), 0u) << res->out;
    EXPECT_EQ(signal_mask(res->out, "SigIgn") & int_term, 0u) << res->out;
  }
}

// A client with its own process group that hangs is killed with what it started: a hung
// sbatch wrapper's child must not outlive the runner's time limit.
// Whether process `pid` is gone within 2 s (or a zombie waiting for whoever reaps orphans);
// kills it when it is not, so that a failing test leaves nothing behind.
bool gone_soon(pid_t pid) {
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(st)), std::istreambuf_iterator<char>());
    size_t paren = text.rfind(')');
    gone = !st || paren == std::string::npos || text.compare(paren + 2, 1, "Z") == 0;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!gone) kill(pid, SIGKILL);
  return gone;
}

TEST(CommandRunnerTest, ATimedOutClientInItsOwnGroupTakesItsChildrenWithIt) {
  SpawnCommandRunner r;
  CommandSpec s;
  s.argv = {"/bin/sh", "-c", "sleep 60 & echo $!; wait"};
  s.timeout = std::chrono::milliseconds(500);
  CommandResult res = r.run(s);
  EXPECT_TRUE(res.timed_out);
  pid_t child = static_cast<pid_t>(std::stol(res.out));
  ASSERT_GT(child, 1);
  EXPECT_TRUE(gone_soon(child)) << "the client's child " << child << " survived the kill";
}

// A Ctrl-C during `--wait` cancels the runner's token: the client that hangs is killed at
// once (with its group when it has one), not at its 60 s limit, and the run says so.
TEST(CommandRunnerTest, ACancelledRunKillsTheProgramAtOnce) {
  CancelToken token;
  SpawnCommandRunner r(&token);
  CommandSpec s;
  s.timeout = std::chrono::seconds(60);
  // The program writes the pid of what must die here, then sleeps: the child of a client in
  // its own group (run), and a plain client that is itself the sleeper (start, then finish).
  const std::string pid_file =
      std::filesystem::temp_directory_path() / ("bl-cancel-" + std::to_string(getpid()) + ".pid");
  struct Case {
    const char* what;
    std::string script;
    bool started_early;
  };
  for (const Case& c : {Case{"run, a child", "sleep 60 & echo $! > \"$0\"; wait", false},
                        Case{"start+finish", "echo $$ > \"$0\"; exec sleep 60", true}}) {
    SCOPED_TRACE(c.what);
    token.reset();
    std::filesystem::remove(pid_file);
    s.argv = {"/bin/sh", "-c", c.script, pid_file};
    std::thread canceller([&token, &pid_file]() {
      for (int i = 0; i < 3000 && !std::filesystem::exists(pid_file); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the pid is written
      token.cancel();
    });
    auto begin = std::chrono::steady_clock::now();
    CommandResult res = c.started_early ? r.start(s)->finish("", {}) : r.run(s);
    auto took = std::chrono::steady_clock::now() - begin;
    canceller.join();
    EXPECT_TRUE(res.cancelled);
    EXPECT_FALSE(res.timed_out);
    EXPECT_FALSE(res.ok());
    EXPECT_EQ(res.exit_code, 128 + SIGKILL);
    EXPECT_LT(took, std::chrono::seconds(20)) << "the run waited for the program";
    std::ifstream pid_in(pid_file);
    long pid = 0;
    ASSERT_TRUE(pid_in >> pid) << "the program wrote no pid";
    pid_t sleeper = static_cast<pid_t>(pid);
    ASSERT_GT(sleeper, 1);
    EXPECT_TRUE(gone_soon(sleeper)) << "the program " << sleeper << " survived the cancel";
  }
  // Still cancelled: the next run ends at once too. Reset, the runner runs as before.
  s.argv = {"sleep", "60"};
  auto begin = std::chrono::steady_clock::now();
  EXPECT_TRUE(r.run(s).cancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(20));
  token.reset();
  s.argv = {"/bin/sh", "-c", "echo ok"};
  CommandResult again = r.run(s);
  EXPECT_TRUE(again.ok());
  EXPECT_FALSE(again.cancelled);
  EXPECT_EQ(again.out, "ok\n");
  std::filesystem::remove(pid_file);
}

// Every program leads a process group of its own (both ways of starting), so that a time
// limit or a cancel kills what it started with it.
TEST(CommandRunnerTest, EveryProgramLeadsAProcessGroupOfItsOwn) {
  SpawnCommandRunner r;
  CommandSpec s;
  // Field 5 of /proc/PID/stat is the process group (the name "(sh)" holds no blank).
  s.argv = {"/bin/sh", "-c", "echo $$ $(cut -d' ' -f5 /proc/$$/stat)"};
  for (bool started_early : {false, true}) {
    CommandResult res = started_early ? r.start(s)->finish("", {}) : r.run(s);
    ASSERT_TRUE(res.ok()) << res.err;
    std::istringstream words(res.out);
    long pid = 0, group = 0;
    ASSERT_TRUE(words >> pid >> group) << res.out;
    EXPECT_EQ(pid, group) << "started early: " << started_early;
    EXPECT_NE(group, static_cast<long>(getpgrp()));
  }
}

// The program's own group is out of reach of the terminal, so a signal that ends the launcher
// (SIGTERM here; a Ctrl-C or a hang-up alike) is passed on to it first: the program and what it
// started end with the launcher instead of running on. Run in a child process, which the
// signal ends as its default action does.
TEST(CommandRunnerTest, ASignalThatEndsTheLauncherReachesTheRunningProgramsGroup) {
  const std::string pid_file =
      std::filesystem::temp_directory_path() / ("bl-forward-" + std::to_string(getpid()) + ".pid");
  std::filesystem::remove(pid_file);
  pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    std::thread signaller([&pid_file]() {
      for (int i = 0; i < 3000 && !std::filesystem::exists(pid_file); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the pid is written
      kill(getpid(), SIGTERM);
    });
    signaller.detach();
    SpawnCommandRunner r;
    CommandSpec s;
    s.argv = {"/bin/sh", "-c", "sleep 60 & echo $! > \"$0\"; wait", pid_file};
    s.timeout = std::chrono::seconds(30);
    r.run(s);
    _exit(0);  // the signal did not end the launcher
  }
  int status = 0;
  ASSERT_EQ(waitpid(launcher, &status, 0), launcher);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "status " << status;
  std::ifstream pid_in(pid_file);
  long pid = 0;
  ASSERT_TRUE(pid_in >> pid) << "the program wrote no pid";
  ASSERT_GT(pid, 1);
  EXPECT_TRUE(gone_soon(static_cast<pid_t>(pid))) << "the program's child outlived the launcher";
  std::filesystem::remove(pid_file);
}

// Output is kept bounded on both streams: the first and the last half of kMaxCapturedOutput,
// with a line that says so between them, and how much was left out. Exactly the bound is
// kept whole.
TEST(CommandRunnerTest, OutputPastTheBoundKeepsItsHeadAndTailAndSaysItWasCut) {
  SpawnCommandRunner r;
  CommandSpec s;
  const size_t filler = 40u << 20;
  const std::string print =
      "echo START; head -c " + std::to_string(filler) + " /dev/zero | tr '\\0' x; echo; echo END";
  s.argv = {"/bin/sh", "-c", "(" + print + ") & (" + print + ") >&2; wait"};
  CommandResult res = r.run(s);
  ASSERT_TRUE(res.ok()) << res.err.substr(0, 200);
  const size_t written = 6 + filler + 1 + 4;
  const std::string marker = "output cut at " + std::to_string(kMaxCapturedOutput) + " bytes";
  using Stream = std::pair<const std::string*, size_t>;
  for (const auto& [text, cut] : {Stream{&res.out, res.out_cut}, Stream{&res.err, res.err_cut}}) {
    EXPECT_EQ(cut, written - kMaxCapturedOutput);
    EXPECT_LT(text->size(), kMaxCapturedOutput + 200);
    EXPECT_EQ(text->substr(0, 6), "START\n");
    EXPECT_EQ(text->substr(text->size() - 6), "x\nEND\n");
    EXPECT_NE(text->find(marker), std::string::npos);
  }
  s.argv = {"/bin/sh", "-c", "head -c " + std::to_string(kMaxCapturedOutput) + " /dev/zero"};
  CommandResult whole = r.run(s);
  EXPECT_EQ(whole.out_cut, 0u);
  EXPECT_EQ(whole.out.size(), kMaxCapturedOutput);
}

}  // namespace
}  // namespace bridge
