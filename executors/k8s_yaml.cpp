#include "executors/k8s_yaml.h"

#include <fmt/format.h>

#include <array>
#include <cstdint>

namespace bridge {

namespace {

using nlohmann::ordered_json;

// Characters YAML parsers refuse raw, or read as line breaks or byte-order marks.
bool needs_escape(uint32_t cp) {
  return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0xfeff || cp == 0xfffe || cp == 0xffff;
}

std::string double_quoted(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    Utf8Char c = decode_utf8(s, i);
    i += c.length;
    uint32_t cp = c.code_point;  // U+FFFD for a byte that is not UTF-8
    switch (cp) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\r':
        out += "\\r";
        continue;
      default:
        break;
    }
    if (needs_escape(cp))
      out += fmt::format("\\u{:04X}", cp);
    else
      append_utf8(out, cp);
  }
  return out + "\"";
}

bool is_yaml11_keyword(const std::string& s) {
  static const char* const kWords[] = {"y",     "Y",     "yes",  "Yes",  "YES",  "n",    "N",
                                       "no",    "No",    "NO",   "true", "True", "TRUE", "false",
                                       "False", "FALSE", "on",   "On",   "ON",   "off",  "Off",
                                       "OFF",   "null",  "Null", "NULL"};
  for (const char* w : kWords)
    if (s == w) return true;
  return false;
}

bool is_plain_safe(const std::string& s) {
  if (s.empty() || s.back() == ':' || is_yaml11_keyword(s)) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  if (!alpha(s[0]) && s[0] != '/') return false;
  for (char c : s) {
    bool allowed = alpha(c) || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '/' ||
                   c == ':' || c == '=' || c == '@' || c == '+' || c == '-';
    if (!allowed) return false;
  }
  return true;
}

// Multi-line printable ASCII without blank-only lines, trailing blanks, leading blanks or
// more than one trailing newline: exactly representable as a literal block.
bool block_eligible(const std::string& s) {
  if (s.find('\n') == std::string::npos || s.empty() || s[0] == ' ' || s[0] == '\t' || s[0] == '\n')
    return false;
  if (s.size() >= 2 && s.compare(s.size() - 2, 2, "\n\n") == 0) return false;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c != '\n' && c != '\t' && (u < 0x20 || u > 0x7e)) return false;
  }
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    std::string line = s.substr(start, end - start);
    if (!line.empty() && (line.back() == ' ' || line.back() == '\t')) return false;
    start = end + 1;
  }
  return true;
}

std::string spaces(int n) { return std::string(static_cast<size_t>(n), ' '); }

// ` |-` plus the lines, each indented by `indent` (empty lines stay empty).
std::string literal_block(const std::string& s, int indent) {
  bool trailing_newline = s.back() == '\n';
  std::string body = trailing_newline ? s.substr(0, s.size() - 1) : s;
  std::string out = trailing_newline ? " |\n" : " |-\n";
  size_t start = 0;
  while (start <= body.size()) {
    size_t end = body.find('\n', start);
    if (end == std::string::npos) end = body.size();
    std::string line = body.substr(start, end - start);
    out += line.empty() ? "\n" : spaces(indent) + line + "\n";
    start = end + 1;
  }
  return out;
}

std::string scalar_text(const ordered_json& v) {
  switch (v.type()) {
    case ordered_json::value_t::null:
      return "null";
    case ordered_json::value_t::boolean:
      return v.get<bool>() ? "true" : "false";
    case ordered_json::value_t::number_integer:
      return std::to_string(v.get<int64_t>());
    case ordered_json::value_t::number_unsigned:
      return std::to_string(v.get<uint64_t>());
    case ordered_json::value_t::number_float:
      return v.dump();
    case ordered_json::value_t::string:
      return yaml_scalar(v.get<std::string>());
    case ordered_json::value_t::object:
      return "{}";
    default:
      return "[]";
  }
}

// `after_dash`: the mapping is an item of a sequence, its first key on the line of the `- `.
void emit_mapping(std::string& out, const ordered_json& obj, int indent, bool after_dash = false);
void emit_sequence(std::string& out, const ordered_json& arr, int indent);

// What follows `key:` or `-`: a nested block, a literal block or ` scalar`.
void emit_after_indicator(std::string& out, const ordered_json& v, int indent, bool in_seq) {
  if (v.is_object() && !v.empty()) {
    out += "\n";
    emit_mapping(out, v, indent + 2);
  } else if (v.is_array() && !v.empty()) {
    out += "\n";
    emit_sequence(out, v, in_seq ? indent + 2 : indent);
  } else if (v.is_string() && block_eligible(v.get_ref<const std::string&>())) {
    out += literal_block(v.get_ref<const std::string&>(), indent + 2);
  } else {
    out += ' ';
    out += scalar_text(v);
    out += '\n';
  }
}

// Everything is appended to the one `out`: a nested block built apart and then copied in
// copied the pod's programs (tens of KB) once per level of nesting.
void emit_mapping(std::string& out, const ordered_json& obj, int indent, bool after_dash) {
  bool first = true;
  for (const auto& [k, v] : obj.items()) {
    if (!first || !after_dash) out.append(static_cast<size_t>(indent), ' ');
    first = false;
    out += yaml_scalar(k);
    out += ':';
    emit_after_indicator(out, v, indent, false);
  }
}

void emit_sequence(std::string& out, const ordered_json& arr, int indent) {
  for (const auto& item : arr) {
    out.append(static_cast<size_t>(indent), ' ');
    if (item.is_object() && !item.empty()) {
      out += "- ";
      emit_mapping(out, item, indent + 2, true);
    } else {
      out += '-';
      emit_after_indicator(out, item, indent, true);
    }
  }
}

}  // namespace

std::string yaml_scalar(const std::string& s) { return is_plain_safe(s) ? s : double_quoted(s); }

std::string to_yaml(const ordered_json& doc) {
  std::string out;
  if (doc.is_object() && !doc.empty())
    emit_mapping(out, doc, 0);
  else if (doc.is_array() && !doc.empty())
    emit_sequence(out, doc, 0);
  else
    out = scalar_text(doc) + "\n";
  return out;
}

std::string to_yaml_stream(const std::vector<ordered_json>& docs,
                           const std::vector<std::string>& comments) {
  std::string out;
  for (std::string c : comments) {
    for (char& ch : c)
      if (ch == '\n' || ch == '\r') ch = ' ';
    out += c.empty() ? "#\n" : "# " + c + "\n";
  }
  for (const auto& d : docs) out += "---\n" + to_yaml(d);
  return out;
}

}  // namespace bridge
