#include "system/line_pattern.h"

#include <utility>

namespace bridge {

namespace {

using ByteSet = std::bitset<256>;

constexpr int kMaxDepth = 64;
constexpr int kMaxRepeat = 1000;

struct Node {
  enum Kind { kEmpty, kSet, kCat, kAlt, kRepeat, kBegin, kEnd, kWordEdge, kNotEdge } kind = kEmpty;
  ByteSet set{};  // kSet
  std::vector<Node> kids{};
  int min = 0, max = -1;  // kRepeat; max -1: unbounded
};

bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_word(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_';
}
bool is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

ByteSet set_of(bool (*pred)(unsigned char)) {
  ByteSet s;
  for (int c = 0; c < 256; ++c) s[static_cast<size_t>(c)] = pred(static_cast<unsigned char>(c));
  return s;
}

ByteSet one(unsigned char c) {
  ByteSet s;
  s.set(c);
  return s;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Recursive descent over the pattern (depth bounded by kMaxDepth groups); the first problem
// ends the parse with `error`.
class Parser {
 public:
  explicit Parser(std::string_view p) : p_(p) {}

  std::optional<Node> parse() {
    Node n = alternation(0);
    if (error_.empty() && at_ < p_.size()) fail("unbalanced parenthesis");  // a stray ')'
    if (!error_.empty()) return std::nullopt;
    return n;
  }
  const std::string& error() const { return error_; }

 private:
  bool more() const { return error_.empty() && at_ < p_.size(); }
  void fail(const char* why) {
    if (error_.empty()) error_ = why;
  }

  Node alternation(int depth) {
    Node first = sequence(depth);
    if (!more() || p_[at_] != '|') return first;
    Node n{Node::kAlt, {}, {std::move(first)}};
    while (more() && p_[at_] == '|') {
      ++at_;
      n.kids.push_back(sequence(depth));
    }
    return n;
  }

  Node sequence(int depth) {
    Node n{Node::kCat, {}, {}};
    while (more() && p_[at_] != '|' && p_[at_] != ')') {
      Node a = atom(depth);
      quantifier(a);
      n.kids.push_back(std::move(a));
    }
    return n;
  }

  // `{n}`, `{n,}`, `{n,m}` at at_: true with the bounds and at_ past it; false (at_ kept) when
  // the text there is no such quantifier.
  bool braces(int& min, int& max) {
    size_t i = at_ + 1;
    auto number = [&](int& out) {
      size_t start = i;
      long long v = 0;
      while (i < p_.size() && p_[i] >= '0' && p_[i] <= '9' && i - start < 9)
        v = v * 10 + (p_[i++] - '0');
      out = static_cast<int>(v);
      return i > start;
    };
    if (!number(min)) return false;
    max = min;
    if (i < p_.size() && p_[i] == ',') {
      ++i;
      if (!number(max)) max = -1;
    }
    if (i >= p_.size() || p_[i] != '}') return false;
    at_ = i + 1;
    return true;
  }

  // One quantifier after `a` (and a lazy `?`); a second one is an error, as in ECMAScript.
  void quantifier(Node& a) {
    if (!more()) return;
    int min = 0, max = -1;
    char c = p_[at_];
    if (c == '*' || c == '+' || c == '?') {
      ++at_;
      min = c == '+' ? 1 : 0;
      max = c == '?' ? 1 : -1;
    } else if (c != '{') {
      return;
    } else if (!braces(min, max)) {
      return fail("unbalanced brace");
    }
    if (a.kind == Node::kBegin || a.kind == Node::kEnd || a.kind == Node::kWordEdge ||
        a.kind == Node::kNotEdge)
      return fail("a repeat (*, +, ?, {n}) with nothing before it");
    if (min > kMaxRepeat || max > kMaxRepeat) return fail("a repeat count over 1000");
    if (max != -1 && max < min) return fail("a bad repeat range ({n,m} with m < n)");
    if (more() && p_[at_] == '?') ++at_;  // lazy: the same lines match
    int unused_min = 0, unused_max = 0;
    if (more() && (p_[at_] == '*' || p_[at_] == '+' || p_[at_] == '?' ||
                   (p_[at_] == '{' && braces(unused_min, unused_max))))
      return fail("a repeat (*, +, ?, {n}) with nothing before it");
    Node r{Node::kRepeat, {}, {std::move(a)}, min, max};
    a = std::move(r);
  }

  Node atom(int depth) {
    char c = p_[at_++];
    switch (c) {
      case '(':
        return group(depth);
      case '[':
        return Node{Node::kSet, char_class(), {}};
      case '.':
        return Node{Node::kSet, ~(one('\n') | one('\r')), {}};
      case '^':
        return Node{Node::kBegin};
      case '$':
        return Node{Node::kEnd};
      case '*':
      case '+':
      case '?':
        fail("a repeat (*, +, ?, {n}) with nothing before it");
        return Node{};
      case '{': {  // as std::regex: `{` only starts a quantifier
        int min = 0, max = 0;
        --at_;
        fail(braces(min, max) ? "a repeat (*, +, ?, {n}) with nothing before it"
                              : "unbalanced brace");
        return Node{};
      }
      case '\\':
        return escape_atom();
      default:
        return Node{Node::kSet, one(static_cast<unsigned char>(c)), {}};
    }
  }

  Node group(int depth) {
    if (depth >= kMaxDepth) {
      fail("groups nested deeper than 64");
      return Node{};
    }
    if (at_ < p_.size() && p_[at_] == '?') {
      if (at_ + 1 < p_.size() && p_[at_ + 1] == ':') {
        at_ += 2;
      } else {
        fail("lookaround and named groups are not supported");
        return Node{};
      }
    }
    Node inner = alternation(depth + 1);
    if (!error_.empty()) return Node{};
    if (at_ >= p_.size() || p_[at_] != ')') {
      fail("unbalanced parenthesis");
      return Node{};
    }
    ++at_;
    return inner;
  }

  Node escape_atom() {
    if (at_ < p_.size() && (p_[at_] == 'b' || p_[at_] == 'B'))
      return Node{p_[at_++] == 'b' ? Node::kWordEdge : Node::kNotEdge};
    ByteSet s;
    escape(s, false);
    return Node{Node::kSet, s, {}};
  }

  // The escape after a `\` (at_ is past the backslash) into `s`; false when it stands for
  // more than one character (`\d`), which cannot end a range.
  bool escape(ByteSet& s, bool in_class) {
    if (at_ >= p_.size()) {
      fail("a bad escape");
      return false;
    }
    char c = p_[at_++];
    auto single = [&](unsigned char b) {
      s |= one(b);
      return true;
    };
    switch (c) {
      case 'd':
      case 'D':
      case 'w':
      case 'W':
      case 's':
      case 'S': {
        ByteSet set = c == 'd' || c == 'D'   ? set_of(is_digit)
                      : c == 'w' || c == 'W' ? set_of(is_word)
                                             : set_of(is_space);
        s |= (c == 'D' || c == 'W' || c == 'S') ? ~set : set;
        return false;
      }
      case 'n':
        return single('\n');
      case 't':
        return single('\t');
      case 'r':
        return single('\r');
      case 'f':
        return single('\f');
      case 'v':
        return single('\v');
      case '0':
        return single('\0');
      case 'b':
        if (in_class) return single('\b');
        break;
      case 'x':
      case 'u':
        return hex_escape(c == 'x' ? 2 : 4, s);
      default:
        if (!is_word(static_cast<unsigned char>(c))) return single(static_cast<unsigned char>(c));
    }
    fail(c >= '1' && c <= '9' ? "back-references are not supported" : "a bad escape");
    return false;
  }

  bool hex_escape(int digits, ByteSet& s) {
    int value = 0;
    for (int k = 0; k < digits; ++k) {
      int v = at_ < p_.size() ? hex_value(p_[at_]) : -1;
      if (v < 0) {
        fail("a bad escape");
        return false;
      }
      value = value * 16 + v;
      ++at_;
    }
    if (value > 0x7f) {
      fail("a \\x or \\u escape beyond ASCII is not supported (write the character itself)");
      return false;
    }
    s |= one(static_cast<unsigned char>(value));
    return true;
  }

  // `[...]` after its `[`: items, ranges, escapes; `[^...]` the complement.
  ByteSet char_class() {
    ByteSet s;
    bool negate = at_ < p_.size() && p_[at_] == '^';
    if (negate) ++at_;
    while (error_.empty()) {
      if (at_ >= p_.size()) {
        fail("unbalanced bracket");
        break;
      }
      if (p_[at_] == ']') {
        ++at_;
        break;
      }
      class_item(s);
    }
    return negate ? ~s : s;
  }

  // One item of a class: a character, an escape, or a range `lo-hi`.
  void class_item(ByteSet& s) {
    ByteSet lo_set;
    bool lo_single = class_char(lo_set);
    if (!error_.empty() || at_ + 1 >= p_.size() || p_[at_] != '-' || p_[at_ + 1] == ']') {
      s |= lo_set;
      return;
    }
    ++at_;  // the '-'
    ByteSet hi_set;
    bool hi_single = class_char(hi_set);
    if (!error_.empty()) return;
    if (!lo_single || !hi_single) return fail("a bad character range");
    size_t lo = 0, hi = 0;
    while (!lo_set[lo]) ++lo;
    while (!hi_set[hi]) ++hi;
    if (lo > hi) return fail("a bad character range");
    for (size_t c = lo; c <= hi; ++c) s.set(c);
  }

  bool class_char(ByteSet& s) {
    char c = p_[at_++];
    if (c != '\\') {
      s |= one(static_cast<unsigned char>(c));
      return true;
    }
    return escape(s, true);
  }

  std::string_view p_;
  size_t at_ = 0;
  std::string error_;
};

}  // namespace

// Turns the parsed tree into the machine's program, stopping at kMaxPatternSteps steps
// (`(a{1000}){1000}` would otherwise copy its group a million times).
class LinePatternCompiler {
 public:
  explicit LinePatternCompiler(LinePattern& out) : out_(out) {}

  bool emit(const Node& n) {
    if (out_.program_.size() > kMaxPatternSteps) return false;
    switch (n.kind) {
      case Node::kEmpty:
        return true;
      case Node::kSet:
        out_.classes_.push_back(n.set);
        return add({LinePattern::Op::kClass, static_cast<std::uint32_t>(out_.classes_.size() - 1)});
      case Node::kCat:
        for (const Node& k : n.kids)
          if (!emit(k)) return false;
        return true;
      case Node::kAlt:
        return alternation(n);
      case Node::kRepeat:
        return repeat(n);
      case Node::kBegin:
        return add({LinePattern::Op::kBegin});
      case Node::kEnd:
        return add({LinePattern::Op::kEnd});
      case Node::kWordEdge:
        return add({LinePattern::Op::kWordEdge});
      case Node::kNotEdge:
        return add({LinePattern::Op::kNotEdge});
    }
    return false;
  }

  bool finish() { return add({LinePattern::Op::kMatch}); }

 private:
  std::uint32_t here() const { return static_cast<std::uint32_t>(out_.program_.size()); }
  bool add(LinePattern::Step s) {
    out_.program_.push_back(s);
    return out_.program_.size() <= kMaxPatternSteps;
  }

  bool alternation(const Node& n) {
    std::vector<std::uint32_t> jumps;
    for (size_t i = 0; i + 1 < n.kids.size(); ++i) {
      std::uint32_t split = here();
      if (!add({LinePattern::Op::kSplit, split + 1}) || !emit(n.kids[i])) return false;
      jumps.push_back(here());
      if (!add({LinePattern::Op::kJump})) return false;
      out_.program_[split].alt = here();
    }
    if (!emit(n.kids.back())) return false;
    for (std::uint32_t j : jumps) out_.program_[j].arg = here();
    return true;
  }

  bool repeat(const Node& n) {
    const Node& kid = n.kids[0];
    for (int i = 0; i < n.min; ++i)
      if (!emit(kid)) return false;
    if (n.max == -1) {  // L: split(L+1, out); kid; jump L; out:
      std::uint32_t loop = here();
      if (!add({LinePattern::Op::kSplit, loop + 1}) || !emit(kid) ||
          !add({LinePattern::Op::kJump, loop}))
        return false;
      out_.program_[loop].alt = here();
      return true;
    }
    std::vector<std::uint32_t> splits;  // each optional copy may be skipped to the end
    for (int i = n.min; i < n.max; ++i) {
      splits.push_back(here());
      if (!add({LinePattern::Op::kSplit, here() + 1}) || !emit(kid)) return false;
    }
    for (std::uint32_t s : splits) out_.program_[s].alt = here();
    return true;
  }

  LinePattern& out_;
};

LinePattern::Compiled LinePattern::compile(std::string_view pattern) {
  Parser parser(pattern);
  std::optional<Node> tree = parser.parse();
  if (!tree) return {std::nullopt, parser.error()};
  LinePattern p;
  LinePatternCompiler compiler(p);
  if (!compiler.emit(*tree) || !compiler.finish())
    return {std::nullopt, "the pattern is too large (its repeats expand past 10000 steps)"};
  return {std::move(p), ""};
}

bool LinePattern::search(std::string_view line) const {
  const size_t n = program_.size();
  std::vector<std::uint32_t> threads, next, stack;
  std::vector<size_t> mark(n, static_cast<size_t>(-1));  // the position a step was added at
  threads.reserve(n);
  next.reserve(n);
  // Adds `start` and every step reachable from it without reading a byte, at `pos`; true when
  // that reaches the match.
  auto add = [&](std::vector<std::uint32_t>& list, std::uint32_t start, size_t pos) {
    stack.assign(1, start);
    const bool prev_word = pos > 0 && is_word(static_cast<unsigned char>(line[pos - 1]));
    const bool next_word = pos < line.size() && is_word(static_cast<unsigned char>(line[pos]));
    while (!stack.empty()) {
      std::uint32_t pc = stack.back();
      stack.pop_back();
      if (mark[pc] == pos) continue;
      mark[pc] = pos;
      const Step& s = program_[pc];
      switch (s.op) {
        case Op::kMatch:
          return true;
        case Op::kClass:
          list.push_back(pc);
          break;
        case Op::kJump:
          stack.push_back(s.arg);
          break;
        case Op::kSplit:
          stack.push_back(s.alt);
          stack.push_back(s.arg);
          break;
        case Op::kBegin:
        case Op::kEnd:
        case Op::kWordEdge:
        case Op::kNotEdge: {
          bool holds = s.op == Op::kBegin      ? pos == 0
                       : s.op == Op::kEnd      ? pos == line.size()
                       : s.op == Op::kWordEdge ? prev_word != next_word
                                               : prev_word == next_word;
          if (holds) stack.push_back(pc + 1);
          break;
        }
      }
    }
    return false;
  };
  for (size_t pos = 0;; ++pos) {
    if (add(threads, 0, pos)) return true;  // a match may start at any position
    if (pos == line.size()) return false;
    next.clear();
    const unsigned char c = static_cast<unsigned char>(line[pos]);
    for (std::uint32_t pc : threads)
      if (classes_[program_[pc].arg][c] && add(next, pc + 1, pos + 1)) return true;
    threads.swap(next);
  }
}

}  // namespace bridge
