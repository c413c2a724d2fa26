// UTF-8: the one decoder of bridge-launch, and what is built on it.
//
// Well-formed means what RFC 3629 says: no overlong forms, no UTF-16 surrogates
// (U+D800..U+DFFF), nothing past U+10FFFF, no truncated sequence. Every function here treats
// a malformed sequence as ONE bad byte and resumes at the next, so a caller always advances.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace bridge {

struct Utf8Char {
  uint32_t code_point = 0xFFFD;  // U+FFFD when !valid
  size_t length = 1;             // bytes consumed (1 for a bad byte)
  bool valid = false;
};

// The character that starts at byte `at` of `s` (at < s.size()).
Utf8Char decode_utf8(std::string_view s, size_t at);

// Byte offset of the first byte in `s` that is not part of well-formed UTF-8, or npos.
size_t first_invalid_utf8(std::string_view s);
inline bool is_valid_utf8(std::string_view s) {
  return first_invalid_utf8(s) == std::string_view::npos;
}

// Appends the UTF-8 encoding of `code_point` (<= U+10FFFF) to `out`.
void append_utf8(std::string& out, uint32_t code_point);

// `s` for a message or a terminal: control characters and bytes that are not UTF-8 become
// `\xNN`, and text past `max_bytes` becomes "..." (never cutting a character in half).
std::string printable_text(std::string_view s, size_t max_bytes);

// A log line for a terminal (`logs`): as printable_text, without a length limit, and with
// tabs kept (rank output aligns its columns with them).
std::string printable_line(std::string_view line);

}  // namespace bridge
