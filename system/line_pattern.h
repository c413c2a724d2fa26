// LinePattern: the regular expressions of `logs --grep`, matched in time linear in the line.
//
// std::regex (libstdc++) matches by recursion: `--grep 'x*y'` on a 100 KiB rank-log line
// overflowed the stack and killed `logs` with SIGSEGV, and patterns such as `(a|a)*b` take
// exponential time. LinePattern compiles the ECMAScript syntax `logs --grep` documents into a
// small program and runs it as a Thompson/Pike machine over the line's bytes, without
// recursion or backtracking: O(line length x program size), whatever the pattern or the line.
//
// Contract: compile accepts literals and escaped metacharacters, `.`, classes `[a-z]`,
// `[^...]` (with `\d \w \s` and their negations, inside and outside a class), groups `( )`
// and `(?: )`, alternation `|`, the quantifiers `* + ? {n} {n,} {n,m}` (a lazy `?` after one
// is accepted; it cannot change whether a line matches), anchors `^ $` (of the line) and
// `\b \B`. What it cannot match in linear time or does not know is refused with a short
// reason, never matched differently: back-references, lookaround, named groups, `\u` beyond
// ASCII. Repeat counts are at most 1000, groups nest at most 64 deep, and the compiled
// program holds at most kMaxPatternSteps steps. Matching is by bytes, as std::regex on char.
// search never throws and allocates only its two thread lists and one mark per step.
#pragma once

#include <bitset>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bridge {

inline constexpr size_t kMaxPatternSteps = 10000;

class LinePattern {
 public:
  struct Compiled;
  static Compiled compile(std::string_view pattern);

  // Whether the pattern matches anywhere in `line`.
  bool search(std::string_view line) const;

  enum class Op : std::uint8_t {
    kClass,     // one byte in classes[arg]
    kSplit,     // continue at arg and at alt
    kJump,      // continue at arg
    kBegin,     // the start of the line
    kEnd,       // the end of the line
    kWordEdge,  // \b
    kNotEdge,   // \B
    kMatch,
  };
  struct Step {
    Op op;
    std::uint32_t arg = 0;
    std::uint32_t alt = 0;
  };

 private:
  friend class LinePatternCompiler;
  std::vector<Step> program_;
  std::vector<std::bitset<256>> classes_;
};

struct LinePattern::Compiled {
  std::optional<LinePattern> pattern;
  std::string error;  // why there is no pattern: "unbalanced parenthesis", ...
};

}  // namespace bridge
