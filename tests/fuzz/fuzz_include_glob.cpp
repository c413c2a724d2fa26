// libFuzzer target: the `runtime.code.include` / `exclude` glob matcher (code_path_matches,
// plan/code_plan.h), which `validate`, `plan` and every launch run on each file of the tree.
// The input is a pattern, a line break, then a path (any bytes). The matcher must answer for
// any pair in O(pattern x path) (libFuzzer's -timeout catches a backtracking one: 30 s for
// `*a*a*a*a*a*a*a*a*ab` once) and, for short pairs, agree with a plain recursive reading of
// the documented rules: `*` and `?` within a path component, `**` across components, `**/`
// any number of whole directories (none included), a pattern without '/' matching the file
// name in any directory, a leading '/' anchoring at the tree's root.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "plan/code_plan.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

// The rules, read by memoised recursion over (pattern position, path position): exponential
// without the memo, so only for short inputs.
class Reference {
 public:
  Reference(std::string_view p, std::string_view s)
      : p_(p), s_(s), memo_((p.size() + 1) * (s.size() + 1), -1) {}
  bool match(size_t i, size_t j) {
    char& m = memo_[i * (s_.size() + 1) + j];
    if (m < 0) m = static_cast<char>(step(i, j));
    return m != 0;
  }

 private:
  bool step(size_t i, size_t j) {
    if (i == p_.size()) return j == s_.size();
    bool more = j < s_.size();
    if (p_.compare(i, 3, "**/") == 0) {  // no directory, or whole ones: up to and with a '/'
      if (match(i + 3, j)) return true;
      for (size_t k = j; k < s_.size(); ++k)
        if (s_[k] == '/' && match(i + 3, k + 1)) return true;
      return false;
    }
    if (p_.compare(i, 2, "**") == 0) return match(i + 2, j) || (more && match(i, j + 1));
    if (p_[i] == '*') return match(i + 1, j) || (more && s_[j] != '/' && match(i, j + 1));
    if (p_[i] == '?') return more && s_[j] != '/' && match(i + 1, j + 1);
    return more && s_[j] == p_[i] && match(i + 1, j + 1);
  }

  std::string_view p_, s_;
  std::vector<char> memo_;
};

bool reference_matches(std::string_view pattern, std::string_view path) {
  if (pattern.find('/') == std::string_view::npos) {
    size_t slash = path.rfind('/');
    if (slash != std::string_view::npos) path.remove_prefix(slash + 1);
  } else if (!pattern.empty() && pattern.front() == '/') {
    pattern.remove_prefix(1);
  }
  return Reference(pattern, path).match(0, 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t eol = input.find('\n');
  if (eol == std::string_view::npos) return 0;
  std::string_view pattern = input.substr(0, eol), path = input.substr(eol + 1);
  bool matched = bridge::code_path_matches(pattern, path);
  if (pattern.size() <= 64 && path.size() <= 256 && matched != reference_matches(pattern, path))
    bridge::fuzz::fail("code_path_matches(\"" + std::string(pattern) + "\", \"" +
                       std::string(path) + "\") is " + (matched ? "true" : "false") +
                       ", the rules say otherwise");
  return 0;
}
