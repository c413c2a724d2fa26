// The real scheduler-command runner (Boost.Process): output, stdin, env, exit codes,
// time-outs, and no SIGPIPE death.
#include "launcher/command_runner.h"

#include <gtest/gtest.h>

namespace bridge {
namespace {

TEST(CommandRunnerTest, CapturesOutputStdinEnvAndExitCodes) {
  BoostCommandRunner r;
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

TEST(CommandRunnerTest, NotFoundTimeoutAndIgnoredStdin) {
  BoostCommandRunner r;
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

}  // namespace
}  // namespace bridge
