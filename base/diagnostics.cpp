#include "base/diagnostics.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>

#include "base/secret_scrub.h"
#include "base/utf8.h"

namespace bridge {

std::string SourceLoc::describe() const {
  if (has_position()) return fmt::format("{}:{}:{}", file.str(), line, column);
  if (from_override()) return fmt::format("override '{}'", override_arg);
  if (from_base()) return "recipe base " + base.str();
  return file;
}

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::kError:
      return "error";
    case Severity::kWarning:
      return "warning";
    case Severity::kInfo:
      return "info";
  }
  return "error";
}

void Diagnostics::add(Severity s, std::string code, std::string path, SourceLoc loc,
                      std::string message, std::string help) {
  items_.push_back(Diagnostic{s, std::move(code), std::move(message), std::move(path),
                              std::move(loc), std::move(help)});
  originals_.push_back(items_.back());
  if (!secrets_.empty()) scrub(items_.back(), originals_.back());
}

void Diagnostics::scrub(Diagnostic& d, const Diagnostic& original) const {
  d.message = scrub_secrets(original.message, secrets_);
  d.help = scrub_secrets(original.help, secrets_);
  d.loc.override_arg = scrub_secrets(original.loc.override_arg, secrets_);
}

void Diagnostics::add_secret(const std::string& value) {
  if (value.empty() || std::find(secrets_.begin(), secrets_.end(), value) != secrets_.end()) return;
  secrets_.push_back(value);
  // A secret found late (the recipe's env is read after the YAML reader complained) still
  // leaves no earlier message holding it.
  for (size_t i = 0; i < items_.size(); ++i) scrub(items_[i], originals_[i]);
}

void Diagnostics::add_secrets(const std::vector<std::string>& values) {
  for (const auto& v : values) add_secret(v);
}

void Diagnostics::add_secret_source(const SourceSpan& span) {
  if (std::find(secret_sources_.begin(), secret_sources_.end(), span) == secret_sources_.end())
    secret_sources_.push_back(span);
}

void Diagnostics::error(std::string code, std::string path, SourceLoc loc, std::string message,
                        std::string help) {
  add(Severity::kError, std::move(code), std::move(path), std::move(loc), std::move(message),
      std::move(help));
}

// A warning about a value the recipe base gave (SourceLoc::base) concerns NVIDIA's own recipe,
// which the runtime treats the same way: the user wrote nothing to change, so it is an info.
void Diagnostics::warning(std::string code, std::string path, SourceLoc loc, std::string message,
                          std::string help) {
  Severity severity = loc.from_base() ? Severity::kInfo : Severity::kWarning;
  add(severity, std::move(code), std::move(path), std::move(loc), std::move(message),
      std::move(help));
}

void Diagnostics::add_as_warnings(const Diagnostics& other, const std::string& why) {
  add_secrets(other.secrets());
  for (const SourceSpan& span : other.secret_sources()) add_secret_source(span);
  for (const Diagnostic& d : other.items()) warning(d.code, d.path, d.loc, d.message + why, d.help);
}

void Diagnostics::info(std::string code, std::string path, SourceLoc loc, std::string message,
                       std::string help) {
  add(Severity::kInfo, std::move(code), std::move(path), std::move(loc), std::move(message),
      std::move(help));
}

void Diagnostics::dropped(std::string code, std::string path, SourceLoc loc, std::string message,
                          std::string help) {
  if (loc.from_base()) {  // NVIDIA's recipe as named, not a request of the user's
    add(Severity::kInfo, std::move(code), std::move(path), std::move(loc), std::move(message),
        std::move(help));
    return;
  }
  if (strict_) help += help.empty() ? "(an error because of --strict)" : " (error under --strict)";
  add(strict_ ? Severity::kError : Severity::kWarning, std::move(code), std::move(path),
      std::move(loc), std::move(message), std::move(help));
}

std::vector<Diagnostic> Diagnostics::by_position() const {
  std::vector<Diagnostic> sorted = items_;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Diagnostic& a, const Diagnostic& b) {
    bool ap = a.loc.has_position(), bp = b.loc.has_position();
    if (ap != bp) return ap;  // positioned first
    if (!ap) return false;    // both without: keep the order found
    return std::tie(a.loc.file, a.loc.line, a.loc.column) <
           std::tie(b.loc.file, b.loc.line, b.loc.column);
  });
  return sorted;
}

bool Diagnostics::has_errors() const { return count(Severity::kError) > 0; }

size_t Diagnostics::count(Severity s) const {
  return static_cast<size_t>(std::count_if(items_.begin(), items_.end(),
                                           [s](const Diagnostic& d) { return d.severity == s; }));
}

bool Diagnostics::has_code(const std::string& code) const {
  return std::any_of(items_.begin(), items_.end(),
                     [&](const Diagnostic& d) { return d.code == code; });
}

namespace {

// Reads line `n` (1-based) of `file`; "" when unreadable. Small cache: a recipe with many
// errors is read once.
std::string source_line(const std::string& file, int n) {
  static std::map<std::string, std::vector<std::string>> cache;
  auto it = cache.find(file);
  if (it == cache.end()) {
    std::vector<std::string> lines;
    std::ifstream in(file, std::ios::binary);
    std::string l;
    while (lines.size() < 100000 && std::getline(in, l)) lines.push_back(l);
    // Columns are counted after a leading BOM (base/yaml_io.cpp): so is the line shown.
    if (!lines.empty() && lines[0].rfind("\xEF\xBB\xBF", 0) == 0) lines[0].erase(0, 3);
    it = cache.emplace(file, std::move(lines)).first;
  }
  if (n < 1 || static_cast<size_t>(n) > it->second.size()) return {};
  std::string line = it->second[static_cast<size_t>(n - 1)];
  if (line.size() > 200) line.resize(200);
  return line;
}

const char* color_of(Severity s) {
  switch (s) {
    case Severity::kError:
      return "\033[1;31m";
    case Severity::kWarning:
      return "\033[1;35m";
    case Severity::kInfo:
      return "\033[1;36m";
  }
  return "";
}

}  // namespace

namespace {
// Messages quote text from outside (plugin options, scheduler and kubectl output): a terminal
// escape there must be shown, not executed. Line breaks and tabs stay (multi-line messages).
std::string without_control_bytes(std::string_view text) {
  auto is_control = [](char ch) {
    auto u = static_cast<unsigned char>(ch);
    return (u < 0x20 && ch != '\n' && ch != '\t') || u == 0x7f;
  };
  // Nearly every message has none: copied whole, not byte by byte.
  auto first = std::find_if(text.begin(), text.end(), is_control);
  std::string out(text.begin(), first);
  if (first == text.end()) return out;
  out.reserve(text.size() + 8);
  for (auto at = first; at != text.end(); ++at) {
    if (is_control(*at))
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(*at));
    else
      out += *at;
  }
  return out;
}

// The bytes [from, to) of line `n` of `file` that `span` covers, if any.
std::optional<std::pair<size_t, size_t>> covered_on_line(const SourceSpan& span,
                                                         const std::string& file, int n,
                                                         size_t line_size) {
  if (span.file != file || n < span.line || n > span.end_line) return std::nullopt;
  size_t from = n == span.line ? static_cast<size_t>(std::max(1, span.column) - 1) : 0;
  size_t to = n == span.end_line ? static_cast<size_t>(std::max(1, span.end_column) - 1)
                                 : std::string::npos;
  to = std::min(to, line_size);
  if (from >= to) return std::nullopt;
  return std::pair{from, to};
}

// The source line as shown under a message: each secret (by value, and the text of each
// secret's source span on this line) as <secret>, control bytes and bytes that are not UTF-8
// as \xNN; `column` (1-based, in bytes of `line`) is moved to the same text in what is shown
// (to the start of a <secret> that covers it).
std::pair<std::string, int> shown_excerpt(const std::string& line, int column,
                                          const std::vector<std::string>& secrets,
                                          const std::vector<std::pair<size_t, size_t>>& hidden) {
  std::vector<size_t> secret_end(line.size(), 0);  // a secret starting here ends there
  for (const auto& s : secrets)
    for (size_t at = s.empty() ? std::string::npos : line.find(s); at != std::string::npos;
         at = line.find(s, at + 1))
      secret_end[at] = std::max(secret_end[at], at + s.size());
  for (const auto& [from, to] : hidden) secret_end[from] = std::max(secret_end[from], to);
  std::string out;
  int shown_column = 0;
  size_t want = static_cast<size_t>(std::max(1, column) - 1);
  for (size_t i = 0; i < line.size();) {
    if (shown_column == 0 && i >= want) shown_column = static_cast<int>(out.size()) + 1;
    if (secret_end[i] > i) {
      size_t end = secret_end[i];
      for (size_t j = i; j < end && j < line.size(); ++j) end = std::max(end, secret_end[j]);
      if (shown_column == 0 && want < end) shown_column = static_cast<int>(out.size()) + 1;
      out += "<secret>";
      i = end;
      continue;
    }
    Utf8Char c = decode_utf8(line, i);
    unsigned char u = static_cast<unsigned char>(line[i]);
    if (!c.valid || (u < 0x20 && u != '\t') || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
      i += 1;
    } else {
      out.append(line, i, c.length);
      i += c.length;
    }
  }
  if (shown_column == 0) shown_column = static_cast<int>(out.size()) + 1;
  return {out, shown_column};
}
}  // namespace

std::string format_diagnostic(const Diagnostic& d, bool color,
                              const std::vector<std::string>& secrets,
                              const std::vector<SourceSpan>& secret_sources) {
  const char* bold = color ? "\033[1m" : "";
  const char* reset = color ? "\033[0m" : "";
  std::string where = d.loc.describe();
  std::string out;
  if (!where.empty()) out += fmt::format("{}{}:{} ", bold, where, reset);
  out += fmt::format("{}{}:{} {}", color ? color_of(d.severity) : "", severity_name(d.severity),
                     reset, without_control_bytes(d.message));
  if (!d.code.empty()) out += fmt::format(" [{}]", d.code);
  out += "\n";
  if (d.loc.has_position()) {
    std::string line = source_line(d.loc.file, d.loc.line);
    std::vector<std::pair<size_t, size_t>> hidden;
    for (const SourceSpan& span : secret_sources)
      if (auto covered = covered_on_line(span, d.loc.file, d.loc.line, line.size()))
        hidden.push_back(*covered);
    auto [text, col] = shown_excerpt(line, d.loc.column, secrets, hidden);
    if (!text.empty()) {
      out += fmt::format("  {:>4} | {}\n", d.loc.line, text);
      out += fmt::format("       | {}{}^{}\n", std::string(static_cast<size_t>(col - 1), ' '),
                         color ? color_of(d.severity) : "", reset);
    }
  }
  if (!d.help.empty())
    out += fmt::format("  {}help:{} {}\n", bold, reset, without_control_bytes(d.help));
  return out;
}

}  // namespace bridge
