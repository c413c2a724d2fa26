#include "base/json_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>

#include "base/utf8.h"

namespace bridge {
namespace {

// What nlohmann writes for a byte that needs an escape (ensure_ascii off): the short escapes,
// else \u00XX in lower-case hex for the other control characters.
void append_escape(std::string& out, unsigned char c) {
  static constexpr std::pair<unsigned char, char> kShort[] = {
      {'"', '"'}, {'\\', '\\'}, {'\b', 'b'}, {'\t', 't'}, {'\n', 'n'}, {'\f', 'f'}, {'\r', 'r'}};
  out += '\\';
  for (auto [byte, letter] : kShort)
    if (c == byte) {
      out += letter;
      return;
    }
  static constexpr char kHex[] = "0123456789abcdef";
  out += "u00";
  out += kHex[c >> 4];
  out += kHex[c & 0xF];
}

// True when one of the 8 bytes of `word` may need a look: a control character, `"`, `\`, or
// a byte of a multi-byte character. May say true for a word that needs none (the borrow of
// a subtraction crosses into the next byte), never false for one that does.
constexpr bool may_need_a_look(uint64_t word) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL;
  constexpr uint64_t kHigh = 0x8080808080808080ULL;
  auto has_zero = [](uint64_t v) { return (v - kOnes) & ~v & kHigh; };
  const uint64_t below_space = (word - kOnes * 0x20) & ~word & kHigh;
  return (below_space | has_zero(word ^ (kOnes * '"')) | has_zero(word ^ (kOnes * '\\')) |
          (word & kHigh)) != 0;
}

// Appends `s` quoted and escaped; false (with `out` as before) when `s` is not valid UTF-8.
// Eight bytes at a time: most of an entry is plain ASCII that is copied as it is.
bool append_quoted(std::string& out, std::string_view s) {
  const size_t before = out.size();
  out += '"';
  bool ascii = true;
  size_t run = 0;
  size_t i = 0;
  while (i < s.size()) {
    if (i + 8 <= s.size()) {
      uint64_t word;
      std::memcpy(&word, s.data() + i, sizeof word);
      if (!may_need_a_look(word)) {
        i += 8;
        continue;
      }
    }
    const size_t end = std::min(s.size(), i + 8);
    for (; i < end; ++i) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c >= 0x80) ascii = false;
      if (c >= 0x20 && c != '"' && c != '\\') continue;
      out.append(s.data() + run, i - run);
      append_escape(out, c);
      run = i + 1;
    }
  }
  out.append(s.data() + run, s.size() - run);
  out += '"';
  if (ascii || is_valid_utf8(s)) return true;
  out.resize(before);
  return false;
}

template <class Json>
class Writer {
 public:
  Writer(std::string& out, int indent) : out_(out), indent_(indent) {}

  void write(const Json& v, int depth) {
    switch (v.type()) {
      case nlohmann::json::value_t::null:
        out_ += "null";
        return;
      case nlohmann::json::value_t::boolean:
        out_ += v.template get<bool>() ? "true" : "false";
        return;
      case nlohmann::json::value_t::number_integer:
        out_ += fmt::format_int(v.template get<int64_t>()).c_str();
        return;
      case nlohmann::json::value_t::number_unsigned:
        out_ += fmt::format_int(v.template get<uint64_t>()).c_str();
        return;
      case nlohmann::json::value_t::string:
        string(v.template get_ref<const std::string&>());
        return;
      case nlohmann::json::value_t::object:
        object(v, depth);
        return;
      case nlohmann::json::value_t::array:
        array(v, depth);
        return;
      default:  // floating point, binary, discarded: nlohmann's own spelling
        out_ += v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  }

 private:
  void string(const std::string& s) {
    if (!append_quoted(out_, s))
      out_ += Json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  void object(const Json& v, int depth) {
    const auto& members = v.template get_ref<const typename Json::object_t&>();
    if (members.empty()) {
      out_ += "{}";
      return;
    }
    out_ += '{';
    bool first = true;
    for (const auto& [key, value] : members) {
      if (!first) out_ += ',';
      first = false;
      line_break(depth + 1);
      string(key);
      out_ += indent_ < 0 ? ":" : ": ";
      write(value, depth + 1);
    }
    line_break(depth);
    out_ += '}';
  }

  void array(const Json& v, int depth) {
    const auto& items = v.template get_ref<const typename Json::array_t&>();
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    out_ += '[';
    bool first = true;
    for (const auto& item : items) {
      if (!first) out_ += ',';
      first = false;
      line_break(depth + 1);
      write(item, depth + 1);
    }
    line_break(depth);
    out_ += ']';
  }

  void line_break(int depth) {
    if (indent_ < 0) return;
    out_ += '\n';
    out_.append(static_cast<size_t>(depth) * static_cast<size_t>(indent_), ' ');
  }

  std::string& out_;
  int indent_;
};

template <class Json>
std::string text_of(const Json& value, int indent) {
  std::string out;
  out.reserve(4096);
  Writer<Json>(out, indent).write(value, 0);
  return out;
}

}  // namespace

std::string json_text(const nlohmann::ordered_json& value, int indent) {
  return text_of(value, indent);
}

std::string json_text(const nlohmann::json& value, int indent) { return text_of(value, indent); }

}  // namespace bridge
