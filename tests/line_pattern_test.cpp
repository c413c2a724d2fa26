// LinePattern (system/line_pattern.h): `logs --grep`'s regular expressions without std::regex.
// std::regex matched by recursion: `--grep 'x*y'` on a 100 KiB rank-log line killed `logs`
// with SIGSEGV (issue 47, "no regex built from input"), and `(a|a)*b` took exponential time.
#include "system/line_pattern.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "system/log_tail.h"

namespace bridge {
namespace {

bool matches(const std::string& pattern, const std::string& line) {
  LinePattern::Compiled c = LinePattern::compile(pattern);
  EXPECT_TRUE(c.pattern) << pattern << ": " << c.error;
  return c.pattern && c.pattern->search(line);
}

std::string error_of(const std::string& pattern) {
  LinePattern::Compiled c = LinePattern::compile(pattern);
  EXPECT_FALSE(c.pattern) << pattern;
  return c.error;
}

TEST(LinePatternTest, AMegabyteLineIsMatchedWithoutRecursion) {
  const std::string line(1 << 20, 'x');
  EXPECT_FALSE(matches("x*y", line));
  EXPECT_TRUE(matches("x*y", line + "y"));
  EXPECT_FALSE(matches("(x|y)*z", line));
  LineFilter::Compiled filter = LineFilter::compile("x*y");
  ASSERT_TRUE(filter.filter);
  EXPECT_FALSE(filter.filter->keep(line));
  EXPECT_TRUE(filter.filter->keep(line + "y"));
}

TEST(LinePatternTest, PatternsThatBacktrackExponentiallyAreAnsweredAtOnce) {
  const std::string as(5000, 'a');
  EXPECT_FALSE(matches("(a|a)*b", as));
  EXPECT_FALSE(matches("(a*)*b", as));
  EXPECT_FALSE(matches("(a|aa)+$b", as));
  EXPECT_TRUE(matches("(a|a)*b", as + "b"));
}

TEST(LinePatternTest, TheEcmaScriptSyntaxLogsGrepDocuments) {
  const std::vector<std::pair<std::pair<const char*, const char*>, bool>> cases = {
      {{"NCCL|CUDA error", "rank 3: CUDA error: illegal"}, true},
      {{"NCCL|CUDA error", "iteration 3/8"}, false},
      {{"iteration +1/", "iteration   1/8"}, true},
      {{"^ab$", "ab"}, true},
      {{"^ab$", "xab"}, false},
      {{"^$", ""}, true},
      {{"x{2,3}y", "xxy"}, true},
      {{"^x{2,3}y", "xxxxy"}, false},
      {{"[a-c]+d", "zzbcd"}, true},
      {{"[^ab]", "abab"}, false},
      {{"\\d+\\.\\d*", "loss 12.5"}, true},
      {{"\\bword\\b", "a word here"}, true},
      {{"\\bword\\b", "swords"}, false},
      {{"\\Bor", "word"}, true},
      {{"(?:ab|cd)+e", "xcdabe"}, true},
      {{"[\\w.-]+@x", "name.a-b@x"}, true},
      {{"\\S+\\s\\S+", "a b"}, true},
      {{"a+?b", "aab"}, true},
      {{"\\x41\\(", "A("}, true},
      {{"[]a]", "a"}, false},  // ECMAScript: `[]` is a class that matches nothing
      {{"[-a]", "-"}, true},
      {{"a.c", "a\tc"}, true},
  };
  for (const auto& [input, want] : cases)
    EXPECT_EQ(matches(input.first, input.second), want) << input.first << " on " << input.second;
}

TEST(LinePatternTest, WhatItCannotMatchInLinearTimeIsRefusedWithAReason) {
  EXPECT_EQ(error_of("(unclosed"), "unbalanced parenthesis");
  EXPECT_EQ(error_of("a)"), "unbalanced parenthesis");
  EXPECT_EQ(error_of("[ab"), "unbalanced bracket");
  EXPECT_EQ(error_of("a{1"), "unbalanced brace");
  EXPECT_EQ(error_of("*a"), "a repeat (*, +, ?, {n}) with nothing before it");
  EXPECT_EQ(error_of("a**"), "a repeat (*, +, ?, {n}) with nothing before it");
  EXPECT_EQ(error_of("[z-a]"), "a bad character range");
  EXPECT_EQ(error_of("a\\"), "a bad escape");
  EXPECT_EQ(error_of("(a)\\1"), "back-references are not supported");
  EXPECT_EQ(error_of("(?=a)b"), "lookaround and named groups are not supported");
  EXPECT_EQ(error_of("a{1001}"), "a repeat count over 1000");
  EXPECT_EQ(error_of("a{3,2}"), "a bad repeat range ({n,m} with m < n)");
  EXPECT_NE(error_of("(a{1000}){1000}").find("too large"), std::string::npos);
  EXPECT_EQ(error_of(std::string(65, '(') + "a" + std::string(65, ')')),
            "groups nested deeper than 64");
  EXPECT_TRUE(matches(std::string(64, '(') + "a" + std::string(64, ')'), "a"));
}

}  // namespace
}  // namespace bridge
