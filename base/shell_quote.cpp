#include "base/shell_quote.h"

#include <algorithm>

namespace bridge {

namespace {

bool needs_no_quotes(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
}

}  // namespace

std::string shell_quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string shell_word(std::string_view s) {
  if (!s.empty() && std::all_of(s.begin(), s.end(), needs_no_quotes)) return std::string(s);
  return shell_quote(s);
}

}  // namespace bridge
