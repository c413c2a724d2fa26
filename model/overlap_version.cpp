// PEP 440 version parsing and ordering: the one place the overlap checks compare versions.
//
// The runtime checks its minimum versions with `packaging.version.Version` (Megatron-Core's
// is_torch_min_version / is_te_min_version), so a launcher that only looked at the numeric
// prefix would accept what the runtime refuses: NGC containers ship pre-release builds such
// as torch `2.6.0a0+ecf3bae40a.nv25.01`, which PEP 440 orders BEFORE 2.6.0. Local labels
// (`+...`) are parsed and kept but never compared: a minimum is always a public version.
#include <algorithm>
#include <cctype>
#include <limits>
#include <string>

#include "model/overlap.h"

namespace bridge {

namespace {

// A cursor over the lower-cased text; every `take_*` either consumes what it matched or
// leaves the position untouched, which is what the optional parts of the grammar need.
class Cursor {
 public:
  explicit Cursor(std::string text) : s_(std::move(text)) {}

  bool done() const { return i_ == s_.size(); }
  size_t pos() const { return i_; }
  void reset(size_t p) { i_ = p; }

  bool take(char c) {
    if (i_ >= s_.size() || s_[i_] != c) return false;
    ++i_;
    return true;
  }
  bool take_separator() { return take('.') || take('-') || take('_'); }
  bool take_word(std::string_view w) {
    if (s_.compare(i_, w.size(), w) != 0) return false;
    i_ += w.size();
    return true;
  }
  bool at_digit() const {
    return i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]));
  }

  // Up to 18 digits fit an int64_t; a longer run is not a version we can order.
  std::optional<int64_t> take_number() {
    size_t start = i_;
    int64_t n = 0;
    while (at_digit()) {
      if (i_ - start == 18) return std::nullopt;
      n = n * 10 + (s_[i_++] - '0');
    }
    if (i_ == start) return std::nullopt;
    return n;
  }
  // The number after a pre/post/dev keyword may be omitted ("1.0rc" == "1.0rc0").
  int64_t take_implicit_number() {
    size_t p = i_;
    take_separator();
    if (!at_digit()) {
      i_ = p;
      return 0;
    }
    return take_number().value_or(-1);
  }
  std::string rest() const { return s_.substr(i_); }

 private:
  std::string s_;
  size_t i_ = 0;
};

bool parse_release(Cursor& c, Version& v) {
  auto first = c.take_number();
  if (!first) return false;
  v.release.push_back(*first);
  if (c.take('!')) {  // what we read was the epoch
    v.epoch = *first;
    v.release.clear();
    auto n = c.take_number();
    if (!n) return false;
    v.release.push_back(*n);
  }
  for (;;) {
    size_t p = c.pos();
    if (!c.take('.') || !c.at_digit()) {
      c.reset(p);
      return true;
    }
    auto n = c.take_number();
    if (!n) return false;
    v.release.push_back(*n);
  }
}

// PEP 440 spellings of the three pre-release phases; longest first so "preview" is not
// read as "pre" + "view".
bool parse_pre(Cursor& c, Version& v) {
  struct Spelling {
    std::string_view word;
    PreRelease::Phase phase;
  };
  static constexpr Spelling kSpellings[] = {
      {"preview", PreRelease::kRc}, {"alpha", PreRelease::kAlpha}, {"beta", PreRelease::kBeta},
      {"pre", PreRelease::kRc},     {"rc", PreRelease::kRc},       {"a", PreRelease::kAlpha},
      {"b", PreRelease::kBeta},     {"c", PreRelease::kRc}};
  size_t p = c.pos();
  c.take_separator();
  for (const auto& s : kSpellings) {
    if (!c.take_word(s.word)) continue;
    int64_t n = c.take_implicit_number();
    if (n < 0) return false;
    v.pre = PreRelease{s.phase, n};
    return true;
  }
  c.reset(p);
  return true;
}

bool parse_post(Cursor& c, Version& v) {
  size_t p = c.pos();
  if (c.take('-') && c.at_digit()) {  // "1.0-1": the implicit post-release spelling
    v.post = c.take_number();
    return v.post.has_value();
  }
  c.reset(p);
  c.take_separator();
  for (std::string_view w : {"post", "rev", "r"}) {
    if (!c.take_word(w)) continue;
    int64_t n = c.take_implicit_number();
    if (n < 0) return false;
    v.post = n;
    return true;
  }
  c.reset(p);
  return true;
}

bool parse_dev(Cursor& c, Version& v) {
  size_t p = c.pos();
  c.take_separator();
  if (!c.take_word("dev")) {
    c.reset(p);
    return true;
  }
  int64_t n = c.take_implicit_number();
  if (n < 0) return false;
  v.dev = n;
  return true;
}

// "+ecf3bae40a.nv25.01": alphanumeric segments joined by '.', '-' or '_'.
bool parse_local(Cursor& c, Version& v) {
  if (!c.take('+')) return true;
  std::string local = c.rest();
  bool segment_start = true;
  for (char ch : local) {
    bool sep = ch == '.' || ch == '-' || ch == '_';
    if (sep && segment_start) return false;
    if (!sep && !std::isalnum(static_cast<unsigned char>(ch))) return false;
    segment_start = sep;
  }
  if (local.empty() || segment_start) return false;
  v.local = local;
  c.reset(c.pos() + local.size());
  return true;
}

// The sort key of packaging.version, which PEP 440's ordering comes down to. A missing part
// sorts at one end or the other: no pre-release sorts after every pre-release, except a bare
// dev release ("2.7.0.dev0"), which sorts before its alphas; no dev sorts after every dev.
struct Key {
  int64_t epoch;
  std::vector<int64_t> release;  // trailing zeros trimmed: "2.6" == "2.6.0"
  int64_t pre_phase;             // -1 before any pre-release, 3 = none
  int64_t pre_number;
  int64_t post;  // min = none
  int64_t dev;   // max = none
};

Key key_of(const Version& v) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  Key k{v.epoch, v.release, 3, 0, v.post.value_or(kMin), v.dev.value_or(kMax)};
  while (!k.release.empty() && k.release.back() == 0) k.release.pop_back();
  if (v.pre) {
    k.pre_phase = v.pre->phase;
    k.pre_number = v.pre->number;
  } else if (!v.post && v.dev) {
    k.pre_phase = -1;
  }
  return k;
}

int sign(bool less, bool greater) { return less ? -1 : greater ? 1 : 0; }

}  // namespace

std::optional<Version> parse_version(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  Cursor c(std::move(lower));
  c.take('v');
  Version v;
  if (!parse_release(c, v) || !parse_pre(c, v) || !parse_post(c, v) || !parse_dev(c, v) ||
      !parse_local(c, v) || !c.done())
    return std::nullopt;
  return v;
}

bool Version::is_prerelease() const { return pre.has_value() || dev.has_value(); }

int compare_versions(const Version& a, const Version& b) {
  Key x = key_of(a);
  Key y = key_of(b);
  if (x.epoch != y.epoch) return sign(x.epoch<y.epoch, x.epoch> y.epoch);
  if (x.release != y.release) return sign(x.release<y.release, x.release> y.release);
  auto px = std::pair(x.pre_phase, x.pre_number);
  auto py = std::pair(y.pre_phase, y.pre_number);
  if (px != py) return sign(px<py, px> py);
  if (x.post != y.post) return sign(x.post<y.post, x.post> y.post);
  return sign(x.dev<y.dev, x.dev> y.dev);
}

}  // namespace bridge
