#include "base/utf8.h"

#include <algorithm>

namespace bridge {

Utf8Char decode_utf8(std::string_view s, size_t at) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char lead = byte(at);
  size_t len = lead < 0x80           ? 1
               : (lead >> 5) == 0x6  ? 2
               : (lead >> 4) == 0xE  ? 3
               : (lead >> 3) == 0x1E ? 4
                                     : 0;
  Utf8Char bad;
  if (len == 0 || at + len > s.size()) return bad;
  uint32_t cp = len == 1 ? lead : lead & (0x7Fu >> len);
  for (size_t k = 1; k < len; ++k) {
    unsigned char next = byte(at + k);
    if ((next & 0xC0) != 0x80) return bad;
    cp = (cp << 6) | (next & 0x3Fu);
  }
  static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kSmallest[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return bad;
  return Utf8Char{cp, len, true};
}

size_t first_invalid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    Utf8Char c = decode_utf8(s, i);
    if (!c.valid) return i;
    i += c.length;
  }
  return std::string_view::npos;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string printable_text(std::string_view s, size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (out.size() >= max_bytes) return out + "...";
    Utf8Char c = decode_utf8(s, i);
    auto b = static_cast<unsigned char>(s[i]);
    if (!c.valid || c.code_point < 0x20 || c.code_point == 0x7F) {
      out += std::string("\\x") + kHex[b >> 4] + kHex[b & 0xF];
      ++i;
      continue;
    }
    out.append(s.substr(i, c.length));
    i += c.length;
  }
  return out;
}

std::string printable_line(std::string_view line) {
  // Most log lines are printable ASCII and tabs: those are copied as they are.
  bool plain = std::all_of(line.begin(), line.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return (u >= 0x20 && u < 0x7f) || c == '\t';
  });
  if (plain) return std::string(line);
  std::string out;
  for (size_t start = 0;;) {
    size_t tab = std::min(line.find('\t', start), line.size());
    out += printable_text(line.substr(start, tab - start), std::string::npos);
    if (tab == line.size()) return out;
    out += '\t';
    start = tab + 1;
  }
}

}  // namespace bridge
