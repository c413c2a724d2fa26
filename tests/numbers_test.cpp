// Numbers from untrusted text (scheduler output, file names, registry fields) never throw:
// out-of-range values are "no number" (base/numbers.h), and the parsers built on it skip
// them instead of ending a command with an internal error.
#include "base/numbers.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/diagnostics.h"
#include "base/json_limits.h"
#include "executors/k8s_status.h"
#include "executors/slurm_scheduler.h"
#include "jobs/registry.h"
#include "model/compare.h"
#include "tests/support/fake_services.h"

namespace bridge {
namespace {

TEST(ParseDecimalTest, AcceptsOnlyWholeInRangeNumbers) {
  EXPECT_EQ(parse_decimal<int>("17"), 17);
  EXPECT_EQ(parse_decimal<int>("-3"), -3);
  EXPECT_EQ(parse_decimal<int64_t>("9223372036854775807"), INT64_MAX);
  for (const char* bad : {"", "99999999999", "1x", " 1", "+1", "0x10", "1.5", "-"})
    EXPECT_FALSE(parse_decimal<int>(bad).has_value()) << bad;
}

TEST(ParseDecimalTest, HugeSchedulerExitCodeIsUnknownNotACrash) {
  JobStatus st = to_job_status({"7", "FAILED", "NonZeroExitCode", "99999999999:0", "", ""});
  EXPECT_EQ(st.state, JobState::kFailed);
  EXPECT_FALSE(st.exit_code.has_value());
  JobStatus signalled = to_job_status({"8", "CANCELLED", "None", "0:15", "", ""});
  EXPECT_EQ(signalled.exit_code.value_or(-1), 128 + 15);
}

TEST(ParseDecimalTest, HugeIterationNumbersAreSkippedByCompare) {
  std::istringstream log(
      " [2026] iteration 99999999999/ 8 | elapsed time per iteration (ms): 10.0 |\n"
      " [2026] iteration        3/       8 | elapsed time per iteration (ms): 12.5 |\n");
  auto samples = parse_iteration_lines(log);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].iteration, 3);
}

// std::regex recursion overflows the stack on very long lines; such lines are skipped.
TEST(ParseDecimalTest, VeryLongLogLinesAreSkippedNotACrash) {
  std::istringstream log(" iteration " + std::string(30000, '9') +
                         "/ 8 | elapsed time per iteration (ms): 1.0 |\n"
                         " iteration        4/       8 | elapsed time per iteration (ms): 2.0 |\n");
  auto samples = parse_iteration_lines(log);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(samples[0].iteration, 4);
}

// JSON from files and programs: deep nesting is refused before parsing (copying a parsed
// million-level document recursed until the stack overflowed).
TEST(JsonLimitsTest, DepthIsCountedOutsideStringsOnly) {
  EXPECT_TRUE(json_depth_within(R"({"a": [1, {"b": "[[[[[["}]})", 3));
  EXPECT_FALSE(json_depth_within(R"({"a": [1, {"b": "[[[[[["}]})", 2));
  EXPECT_FALSE(json_depth_within("[[[1]]]", 2));
  EXPECT_TRUE(json_depth_within(R"(["\"[[["])", 1));    // an escaped quote inside a string
  EXPECT_FALSE(json_depth_within(R"(["\\"[[["])", 1));  // an escaped backslash, then the end
}

TEST(JsonLimitsTest, DeeplyNestedRegistryEntryAndKubectlOutputAreRefusedNotACrash) {
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  auto items = parse_kubectl_items(R"({"items": )" + deep + "}");
  EXPECT_FALSE(items.ok());
  EXPECT_EQ(items.why(), "kubectl printed JSON nested too deeply");
  auto dir = std::filesystem::temp_directory_path() / ("bl-deep-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "jobs");
  std::ofstream(dir / "jobs" / "x-1.json")
      << R"({"format": "bridge-launch-job/1", "id": "x-1", "name": "x", "plan": )" << deep << "}";
  Diagnostics diags;
  testing::TestServices seams;
  EXPECT_TRUE(JobRegistry(dir.string(), seams.registry_seams()).list(diags).empty());
  EXPECT_TRUE(diags.has_code("registry-corrupt-entry"));
  std::filesystem::remove_all(dir);
}

// Text from outside (scheduler reasons, plugin options, kubectl) reaches a terminal escaped.
TEST(UntrustedTextTest, TerminalEscapesAreShownNotExecuted) {
  Diagnostic d;
  d.message = "bad value \x1b[31mred\x1b[0m\nsecond line\tok";
  d.help = "fix \x07 it";
  std::string shown = format_diagnostic(d, false);
  EXPECT_EQ(shown.find('\x1b'), std::string::npos) << shown;
  EXPECT_EQ(shown.find('\x07'), std::string::npos) << shown;
  EXPECT_NE(shown.find("\\x1b[31mred"), std::string::npos) << shown;
  EXPECT_NE(shown.find("\nsecond line\tok"), std::string::npos) << shown;
  JobStatus st = to_job_status({"9", "PENDING", "evil\x1b]0;title\x07", "", "", ""});
  EXPECT_EQ(st.detail.find('\x1b'), std::string::npos) << st.detail;
  EXPECT_EQ(st.pending_reason.find('\x1b'), std::string::npos) << st.pending_reason;
}

// The state and the exit code text of a Slurm job reach `status`, `list` and --wait's line
// as its reason does: escaped, one line, bounded.
TEST(UntrustedTextTest, SlurmStateAndExitCodeAreEscapedLikeTheReason) {
  JobStatus st = to_job_status({"9", "FAILED\x1b[2J\nline", "", "1:0\x1b]0;t\x07\n", "", ""});
  EXPECT_EQ(st.state, JobState::kUnknown);
  for (char c : {'\x1b', '\x07', '\n'})
    EXPECT_EQ(st.detail.find(c), std::string::npos) << st.detail;
  EXPECT_NE(st.detail.find("FAILED\\x1b[2J\\x0aline"), std::string::npos) << st.detail;
  EXPECT_NE(st.detail.find("ExitCode=1:0\\x1b]0;t"), std::string::npos) << st.detail;
  JobStatus long_state = to_job_status({"9", std::string(100000, 'X'), "", "", "", ""});
  EXPECT_LT(long_state.detail.size(), 300u);
}

}  // namespace
}  // namespace bridge
