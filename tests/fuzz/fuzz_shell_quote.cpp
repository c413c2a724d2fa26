// libFuzzer target: shell_quote and shell_word (base/shell_quote.h) must each produce one
// POSIX shell word that a shell turns back into exactly the input bytes, for any bytes.
// Running bash per input is far too slow for fuzzing, so this file carries a small, strict
// POSIX word reader for the only forms a word may use: '...' (no escapes inside), \x outside
// quotes, and the characters no shell interprets ([A-Za-z0-9_@%+=:,./-]).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "base/shell_quote.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

// Reads `word` as a POSIX shell word limited to single-quoted runs and backslash escapes;
// nullopt if anything else appears unquoted (a blank, $, `, ;, a glob, ...), i.e. if the
// shell could split, expand or interpret it.
std::optional<std::string> unquote(const std::string& word) {
  std::string out;
  size_t i = 0;
  while (i < word.size()) {
    char c = word[i];
    if (c == '\'') {
      size_t close = word.find('\'', i + 1);
      if (close == std::string::npos) return std::nullopt;  // unterminated quote
      out.append(word, i + 1, close - i - 1);
      i = close + 1;
    } else if (c == '\\') {
      if (i + 1 >= word.size() || word[i + 1] == '\n') return std::nullopt;  // line join
      out += word[i + 1];
      i += 2;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               std::string("_@%+=:,./-").find(c) != std::string::npos) {
      out += c;  // literal for every POSIX shell: no expansion, splitting or globbing
      ++i;
    } else {
      return std::nullopt;  // any other unquoted character may be interpreted
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  std::string quoted = bridge::shell_quote(input);
  if (quoted.empty()) bridge::fuzz::fail("empty quoting (an empty word would vanish)");
  std::optional<std::string> back = unquote(quoted);
  if (!back) bridge::fuzz::fail("shell_quote produced an unsafe word: " + quoted);
  if (*back != input) bridge::fuzz::fail("round trip changed the bytes: " + quoted);
  // Quoting twice must also round-trip (a word inside `bash -c '...'`).
  std::optional<std::string> twice = unquote(bridge::shell_quote(quoted));
  if (!twice || *twice != quoted) bridge::fuzz::fail("double quoting does not round-trip");
  std::string word = bridge::shell_word(input);
  std::optional<std::string> word_back = unquote(word);
  if (!word_back || *word_back != input)
    bridge::fuzz::fail("shell_word changed the bytes: " + word);
  return 0;
}
