// Decimal integers from text, without exceptions.
//
// parse_decimal<T>("123") -> 123; nullopt for an empty string, any byte that is not a digit
// (a leading '-' is allowed for signed T), or a value outside T. The one place that turns
// scheduler output, file names and registry fields into numbers: std::stoi throws on
// out-of-range input (`ExitCode=99999999999:0` once ended `status` with "internal error").
#pragma once

#include <charconv>
#include <optional>
#include <string_view>

namespace bridge {

template <class T>
std::optional<T> parse_decimal(std::string_view text) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace bridge
