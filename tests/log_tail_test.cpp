// system/log_tail.h: whole lines while the writer may append, the unfinished last line
// only at the end, bounded memory for a "line" that never ends, a truncated file re-read.
#include "system/log_tail.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/test_util.h"

namespace bridge {
namespace {

void append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::app) << text;
}

TEST(LogTail, WholeLinesWhileRunningTheUnfinishedLineAtTheEnd) {
  test::TempDir dir;
  std::string path = dir.path() + "/rank0.log";
  LogTail tail("rank 0", path);
  std::ostringstream out;
  tail.pump(out, true, false);  // no file yet: nothing
  EXPECT_EQ(out.str(), "");
  append(path, "iteration 1\niteration 2 par");
  tail.pump(out, true, false);
  EXPECT_EQ(out.str(), "[rank 0] iteration 1\n");
  append(path, "tial\nlast line without newline");
  tail.pump(out, true, false);
  EXPECT_EQ(out.str(), "[rank 0] iteration 1\n[rank 0] iteration 2 partial\n");
  tail.pump(out, true, true);
  EXPECT_EQ(out.str(),
            "[rank 0] iteration 1\n[rank 0] iteration 2 partial\n"
            "[rank 0] last line without newline\n");
}

TEST(LogTail, AnEndlessLineIsPrintedInBoundedPieces) {
  test::TempDir dir;
  std::string path = dir.path() + "/node0.log";
  append(path, std::string(kMaxLineBytes * 2 + 10, 'x'));
  LogTail tail("node 0", path);
  std::ostringstream out;
  tail.pump(out, false, false);
  EXPECT_EQ(out.str(),
            std::string(kMaxLineBytes, 'x') + "\n" + std::string(kMaxLineBytes, 'x') + "\n");
  tail.pump(out, false, true);
  EXPECT_EQ(out.str().size(), kMaxLineBytes * 2 + 2 + 11);
}

TEST(LogTail, ATruncatedFileIsReadAgainFromTheStart) {
  test::TempDir dir;
  std::string path = dir.path() + "/batch.out";
  append(path, "first run, a long line\n");
  LogTail tail("batch", path);
  std::ostringstream out;
  tail.pump(out, false, false);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "new\n";
  tail.pump(out, false, false);
  EXPECT_EQ(out.str(), "first run, a long line\nnew\n");
}

TEST(LogTail, StartAtTheLastLinesThenFollowWhatIsAppended) {
  test::TempDir dir;
  std::string path = dir.path() + "/rank0.log";
  append(path, "one\ntwo\nthree\n");
  for (auto [n, want] : std::vector<std::pair<size_t, std::string>>{{0, ""},
                                                                    {1, "three\n"},
                                                                    {2, "two\nthree\n"},
                                                                    {3, "one\ntwo\nthree\n"},
                                                                    {99, "one\ntwo\nthree\n"}}) {
    LogTail tail("rank 0", path);
    tail.start_at_last_lines(n);
    std::ostringstream out;
    tail.pump(out, false, true);
    EXPECT_EQ(out.str(), want) << n;
  }
  // An unfinished last line counts as a line; what is appended later follows.
  append(path, "four");
  LogTail tail("rank 0", path);
  tail.start_at_last_lines(1);
  std::ostringstream out;
  tail.pump(out, false, false);
  append(path, "!\nfive\n");
  tail.pump(out, false, true);
  EXPECT_EQ(out.str(), "four!\nfive\n");
}

TEST(LogTail, GrepKeepsMatchingLinesAndABadPatternSaysWhy) {
  auto grep = LineFilter::compile("NCCL|CUDA error").filter;
  ASSERT_TRUE(grep);
  EXPECT_TRUE(grep->keep("rank 3: CUDA error: an illegal memory access"));
  EXPECT_FALSE(grep->keep("iteration 3/8"));
  EXPECT_TRUE(LineFilter().keep("anything"));
  LineFilter::Compiled bad = LineFilter::compile("(unclosed");
  EXPECT_FALSE(bad.filter);
  EXPECT_EQ(bad.error, "unbalanced parenthesis");
  test::TempDir dir;
  std::string path = dir.path() + "/rank0.log";
  append(path, "a NCCL b\nplain\n");
  LogTail tail("rank 0 gpu-a", path);
  std::ostringstream out;
  tail.pump(out, true, true, *grep);
  EXPECT_EQ(out.str(), "[rank 0 gpu-a] a NCCL b\n");
}

// `logs` prints a rank's bytes to a terminal (issue 47, item 13): an escape sequence in a log
// (a title change, a screen clear, a colour) or in a host name from the job dir's `hosts`
// file reached it raw. Control characters and bytes that are not UTF-8 are escaped; tabs,
// UTF-8 text and the `[rank N host]` prefix stay; --grep still matches the line as written.
TEST(LogTail, ControlCharactersAreEscapedTabsAndTextStay) {
  test::TempDir dir;
  std::string path = dir.path() + "/rank0.log";
  append(path,
         "step\t1\tloss 2.5 \xe2\x9c\x93\n"
         "\x1b]0;owned\x07\x1b[2J\x1b[31mred\r\x7f \xff\n"
         "plain line\n");
  std::ostringstream out;
  LogTail("rank 0 node\x1b[1m1", path).pump(out, true, true);
  EXPECT_EQ(out.str(),
            "[rank 0 node\\x1b[1m1] step\t1\tloss 2.5 \xe2\x9c\x93\n"
            "[rank 0 node\\x1b[1m1] \\x1b]0;owned\\x07\\x1b[2J\\x1b[31mred\\x0d\\x7f \\xff\n"
            "[rank 0 node\\x1b[1m1] plain line\n");
  LineFilter::Compiled grep = LineFilter::compile("\x1b\\[31m");
  ASSERT_TRUE(grep.filter) << grep.error;
  std::ostringstream matched;
  LogTail("rank 0", path).pump(matched, false, true, *grep.filter);
  EXPECT_EQ(matched.str(), "\\x1b]0;owned\\x07\\x1b[2J\\x1b[31mred\\x0d\\x7f \\xff\n");
}

}  // namespace
}  // namespace bridge
