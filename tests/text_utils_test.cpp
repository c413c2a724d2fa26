// The one home of each text utility: shell quoting (base/shell_quote.h) and UTF-8
// (base/utf8.h). The fuzzers in tests/fuzz cover arbitrary bytes; these pin the cases.
#include <gtest/gtest.h>

#include <string>

#include "base/shell_quote.h"
#include "base/utf8.h"

namespace bridge {
namespace {

TEST(ShellQuote, AlwaysQuotesAndEscapesSingleQuotes) {
  EXPECT_EQ(shell_quote("plain"), "'plain'");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("it's $HOME"), "'it'\\''s $HOME'");
}

TEST(ShellQuote, ShellWordIsBareOnlyWhenNothingCanBeInterpreted) {
  EXPECT_EQ(shell_word("--master-port=29500"), "--master-port=29500");
  EXPECT_EQ(shell_word("/opt/x_1/a.py,b@c%d+e:f"), "/opt/x_1/a.py,b@c%d+e:f");
  EXPECT_EQ(shell_word(""), "''");
  EXPECT_EQ(shell_word("a b"), "'a b'");
  EXPECT_EQ(shell_word("$(id)"), "'$(id)'");
  EXPECT_EQ(shell_word("~root"), "'~root'");
  EXPECT_EQ(shell_word("*"), "'*'");
}

TEST(Utf8, DecodesAndRejectsWhatRfc3629Rejects) {
  EXPECT_EQ(decode_utf8("\xc3\xa9", 0).code_point, 0xE9u);
  EXPECT_EQ(decode_utf8("\xf0\x9f\x98\x80", 0).length, 4u);
  EXPECT_FALSE(decode_utf8("\xc0\xaf", 0).valid);          // overlong '/'
  EXPECT_FALSE(decode_utf8("\xed\xa0\x80", 0).valid);      // surrogate U+D800
  EXPECT_FALSE(decode_utf8("\xf4\x90\x80\x80", 0).valid);  // past U+10FFFF
  EXPECT_FALSE(decode_utf8("\xe2\x82", 0).valid);          // truncated
  EXPECT_EQ(decode_utf8("\xff", 0).length, 1u);            // a bad byte is skipped alone
  EXPECT_EQ(first_invalid_utf8("ok \xc3\xa9 \xff"), 6u);
  EXPECT_TRUE(is_valid_utf8("ascii and \xe2\x82\xac"));
  std::string encoded;
  for (uint32_t cp : {0x41u, 0xE9u, 0x20ACu, 0x1F600u}) append_utf8(encoded, cp);
  EXPECT_EQ(encoded, "A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
}

TEST(Utf8, PrintableTextEscapesControlAndBadBytesAndNeverSplitsACharacter) {
  EXPECT_EQ(printable_text("a\x1b[31mb\n", 100), "a\\x1b[31mb\\x0a");
  EXPECT_EQ(printable_text("\xff\xc3\xa9", 100), "\\xff\xc3\xa9");
  EXPECT_EQ(printable_text("\xc3\xa9\xc3\xa9\xc3\xa9", 3), "\xc3\xa9\xc3\xa9...");
}

}  // namespace
}  // namespace bridge
