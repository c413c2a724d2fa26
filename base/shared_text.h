// SharedText: an immutable string whose copies share one allocation.
//
// Contract: a SharedText holds a fixed text; copying it copies a reference, never the bytes,
// and every copy reads the same text until the last one goes. It converts from and to
// std::string where a std::string is expected, and compares by text. Copies may be made and
// dropped on different threads (the count is atomic); the text itself is never written.
//
// Why: every value read from a recipe carries its file name in its SourceLoc, and a path
// longer than std::string's inline buffer cost one allocation per value and per copy of the
// value: about 5 % of a dry-run's instructions (docs/performance.md, round 9).
#pragma once

#include <compare>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

namespace bridge {

class SharedText {
 public:
  SharedText() = default;
  // Implicit, as a std::string member was: `loc.file = path`, `SourceLoc{path, 1, 1, {}}`.
  SharedText(std::string text)  // NOLINT(google-explicit-constructor)
      : text_(text.empty() ? nullptr : std::make_shared<const std::string>(std::move(text))) {}
  SharedText(const char* text)  // NOLINT(google-explicit-constructor)
      : SharedText(std::string(text)) {}
  SharedText(std::string_view text)  // NOLINT(google-explicit-constructor)
      : SharedText(std::string(text)) {}

  const std::string& str() const { return text_ ? *text_ : empty_text(); }
  operator const std::string&() const { return str(); }  // NOLINT(google-explicit-constructor)
  bool empty() const { return str().empty(); }
  size_t size() const { return str().size(); }

  friend bool operator==(const SharedText& a, const SharedText& b) {
    return a.text_ == b.text_ || a.str() == b.str();
  }
  friend std::strong_ordering operator<=>(const SharedText& a, const SharedText& b) {
    return a.str().compare(b.str()) <=> 0;
  }
  friend std::ostream& operator<<(std::ostream& out, const SharedText& t) { return out << t.str(); }

 private:
  static const std::string& empty_text() {
    static const std::string kEmpty;
    return kEmpty;
  }
  std::shared_ptr<const std::string> text_;  // null for the empty text
};

}  // namespace bridge
