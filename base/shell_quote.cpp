#include "base/shell_quote.h"

#include <algorithm>

namespace bridge {

namespace {

bool needs_no_quotes(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
}

}  // namespace

// Copies the runs between single quotes whole: scripts quote programs of many kilobytes.
std::string shell_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '\'';
  for (size_t from = 0;;) {
    size_t quote = s.find('\'', from);
    out.append(s.substr(from, quote - from));
    if (quote == std::string_view::npos) break;
    out += "'\\''";
    from = quote + 1;
  }
  out += '\'';
  return out;
}

std::string shell_word(std::string_view s) {
  if (!s.empty() && std::all_of(s.begin(), s.end(), needs_no_quotes)) return std::string(s);
  return shell_quote(s);
}

}  // namespace bridge
