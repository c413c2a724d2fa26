// executors/log_tail.h: whole lines while the writer may append, the unfinished last line
// only at the end, bounded memory for a "line" that never ends, a truncated file re-read.
#include "executors/log_tail.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "test_util.h"

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

}  // namespace
}  // namespace bridge
