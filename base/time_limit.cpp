#include "base/time_limit.h"

#include <algorithm>
#include <vector>

namespace bridge {

namespace {

// At most 9 digits a part: no part can overflow, and no real limit needs more.
std::optional<int64_t> part(std::string_view s) {
  if (s.empty() || s.size() > 9 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  int64_t v = 0;
  for (char c : s) v = v * 10 + (c - '0');
  return v;
}

}  // namespace

std::optional<int64_t> time_limit_seconds(std::string_view text) {
  if (text == "UNLIMITED" || text == "INFINITE") return 0;
  std::optional<int64_t> days;
  if (size_t dash = text.find('-'); dash != std::string_view::npos) {
    days = part(text.substr(0, dash));
    if (!days) return std::nullopt;
    text.remove_prefix(dash + 1);
  }
  std::vector<int64_t> parts;
  for (size_t start = 0;;) {
    size_t colon = text.find(':', start);
    auto p = part(text.substr(start, colon == std::string_view::npos ? colon : colon - start));
    if (!p || parts.size() == 3) return std::nullopt;
    parts.push_back(*p);
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  if (parts.size() == 3 && !days) {
    return parts[0] * 3600 + parts[1] * 60 + parts[2];
  }
  if (days) {  // DAYS-HOURS[:MINUTES[:SECONDS]]
    int64_t s = *days * 86400 + parts[0] * 3600;
    if (parts.size() > 1) s += parts[1] * 60;
    if (parts.size() > 2) s += parts[2];
    return s;
  }
  // MINUTES or MINUTES:SECONDS
  return parts[0] * 60 + (parts.size() > 1 ? parts[1] : 0);
}

}  // namespace bridge
