#include "model/expand.h"

#include <fmt/format.h>

#include <cctype>

namespace bridge {

namespace {

bool ident_char(char c, bool first) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' ||
         (!first && std::isdigit(static_cast<unsigned char>(c)));
}

}  // namespace

std::optional<std::string> expand_vars(const std::string& text, const HostEnvironment& env,
                                       const std::string& path, const SourceLoc& loc,
                                       Diagnostics& diags, std::vector<std::string>* expanded) {
  std::string out;
  bool ok = true;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 3, "$${") == 0) {
      out += "${";
      i += 2;
      continue;
    }
    if (text.compare(i, 2, "${") != 0) {
      out += text[i];
      continue;
    }
    // Scan only the identifier: searching for the next `}` from every `${` made text with
    // many `${` and no `}` quadratic (a million of them took 10 s).
    size_t close = i + 2;
    while (close < text.size() && ident_char(text[close], close == i + 2)) ++close;
    if (close == i + 2 || close >= text.size() || text[close] != '}') {
      out += text[i];  // not our syntax: keep it literally
      continue;
    }
    std::string name = text.substr(i + 2, close - i - 2);
    auto value = env.get(name);
    if (!value) {
      diags.error(
          "unset-variable", path, loc,
          fmt::format("`${{{}}}` in `{}` refers to an unset environment variable", name, path),
          fmt::format("export {} before running bridge-launch, or write `$${{{}}}` for a "
                      "literal",
                      name, name));
      ok = false;
    } else {
      out += *value;
      if (expanded) expanded->push_back(name);
    }
    i = close;
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<std::string> expand_path(const std::string& text, const HostEnvironment& env,
                                       const std::string& path, const SourceLoc& loc,
                                       Diagnostics& diags) {
  std::string t = text;
  if (t == "~" || t.rfind("~/", 0) == 0) t = "${HOME}" + t.substr(1);
  return expand_vars(t, env, path, loc, diags);
}

}  // namespace bridge
