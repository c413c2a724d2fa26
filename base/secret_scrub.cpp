#include "base/secret_scrub.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string_view>

#include "base/utf8.h"

namespace bridge {

namespace {

// `s` as JSON writes it; `html` adds Go's encoding/json escapes of &, <, > (kubectl echoes
// objects through it). U+2028/U+2029 are escaped as Go does.
std::string json_escaped(const std::string& s, bool html) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (s.compare(i, 3, "\xe2\x80\xa8") == 0 || s.compare(i, 3, "\xe2\x80\xa9") == 0) {
      out += s[i + 2] == '\xa8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || (html && (c == '&' || c == '<' || c == '>'))) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string base64(const std::string& s) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < s.size(); i += 3) {
    uint32_t n = static_cast<uint32_t>(static_cast<unsigned char>(s[i])) << 16;
    if (i + 1 < s.size()) n |= static_cast<uint32_t>(static_cast<unsigned char>(s[i + 1])) << 8;
    if (i + 2 < s.size()) n |= static_cast<unsigned char>(s[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < s.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < s.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// Whether the spelling found at `pos` is to be replaced. A short value (`v`, `yes`, `1234`)
// also occurs inside the words of every message (`value`): it is replaced only where it
// stands alone, not inside a longer word; a longer one wherever it occurs.
bool replace_here(const std::string& text, size_t pos, size_t size) {
  constexpr size_t kAnywhere = 8;
  if (size >= kAnywhere) return true;
  bool alone_before = pos == 0 || !word_char(text[pos - 1]) || !word_char(text[pos]);
  bool alone_after =
      pos + size == text.size() || !word_char(text[pos + size]) || !word_char(text[pos + size - 1]);
  return alone_before && alone_after;
}

}  // namespace

std::string scrub_secrets(std::string text, const std::vector<std::string>& secrets) {
  constexpr std::string_view kShown = "<secret>";
  // Longest first: a secret that holds a shorter one (a URL with an API key in it) is
  // replaced whole, not cut around the shorter one's <secret>.
  std::vector<const std::string*> by_length;
  for (const auto& secret : secrets) by_length.push_back(&secret);
  std::stable_sort(
      by_length.begin(), by_length.end(),
      [](const std::string* a, const std::string* b) { return a->size() > b->size(); });
  for (const std::string* secret_ptr : by_length) {
    const std::string& secret = *secret_ptr;
    if (secret.empty()) continue;
    for (const std::string& s :
         {json_escaped(secret, true), json_escaped(secret, false), base64(secret),
          printable_text(secret, std::string::npos), secret}) {
      for (size_t pos = text.find(s); pos != std::string::npos;) {
        if (!replace_here(text, pos, s.size())) {
          pos = text.find(s, pos + 1);
          continue;
        }
        text.replace(pos, s.size(), kShown);
        pos = text.find(s, pos + kShown.size());
      }
    }
  }
  return text;
}

}  // namespace bridge
