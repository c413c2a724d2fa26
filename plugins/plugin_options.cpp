#include "plugins/plugin_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "base/suggest.h"

namespace bridge {

namespace {

std::optional<int64_t> parse_int(const YamlNode& n) {
  if (!n.is_scalar() || n.quoted || n.scalar.empty()) return std::nullopt;
  const std::string& s = n.scalar;
  size_t start = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (start == s.size()) return std::nullopt;
  for (size_t i = start; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
  errno = 0;
  long long v = std::strtoll(s.c_str(), nullptr, 10);
  if (errno == ERANGE) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::optional<bool> parse_bool(const YamlNode& n) {
  if (!n.is_scalar() || n.quoted) return std::nullopt;
  const std::string& s = n.scalar;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  return std::nullopt;
}

std::string shown(const YamlNode& n) {
  if (!n.is_scalar()) return n.kind_name();
  return "`" + (n.scalar.size() > 40 ? n.scalar.substr(0, 40) + "..." : n.scalar) + "`";
}

bool hydra_safe(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("_-+./:@%~").find(c) != std::string_view::npos;
}

std::string join_ints(const std::vector<int64_t>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + std::to_string(values[i]);
  return out;
}

}  // namespace

PluginOptions::PluginOptions(std::string plugin, const YamlNode& options, SourceLoc plugin_loc,
                             Diagnostics& diags)
    : plugin_(std::move(plugin)),
      node_(options),
      plugin_loc_(std::move(plugin_loc)),
      diags_(diags) {
  read_args_options();
}

std::string PluginOptions::plugin_path() const { return "plugins." + plugin_; }

std::string PluginOptions::path(std::string_view key) const {
  return plugin_path() + "." + std::string(key);
}

SourceLoc PluginOptions::loc(std::string_view key) const {
  const YamlNode* v = node_.is_map() ? node_.find(key) : nullptr;
  return v && !v->is_null() ? v->loc : plugin_loc_;
}

void PluginOptions::error(std::string_view key, std::string code, std::string message,
                          std::string help) {
  ++errors_;
  diags_.error(std::move(code), key.empty() ? plugin_path() : path(key), loc(key),
               std::move(message), std::move(help));
}

const YamlNode* PluginOptions::lookup(std::string_view key) {
  known_.emplace_back(key);
  if (!node_.is_map()) return nullptr;
  const YamlNode* v = node_.find(key);
  return v && !v->is_null() ? v : nullptr;
}

void PluginOptions::type_error(std::string_view key, const YamlNode& v, const char* expected) {
  error(key, "wrong-type", fmt::format("`{}` expects {}, got {}", path(key), expected, shown(v)));
}

bool PluginOptions::in_range(std::string_view key, int64_t value, int64_t min) {
  if (value >= min) return true;
  error(key, "out-of-range", fmt::format("`{}` must be >= {}, got {}", path(key), min, value));
  return false;
}

bool PluginOptions::get_bool(std::string_view key, bool fallback) {
  const YamlNode* v = lookup(key);
  if (!v) return fallback;
  auto b = parse_bool(*v);
  if (!b) type_error(key, *v, "a boolean (true or false, unquoted)");
  return b.value_or(fallback);
}

std::optional<int64_t> PluginOptions::opt_int(std::string_view key, int64_t min) {
  const YamlNode* v = lookup(key);
  if (!v) return std::nullopt;
  auto i = parse_int(*v);
  if (!i) {
    type_error(key, *v, "an integer");
    return std::nullopt;
  }
  return in_range(key, *i, min) ? i : std::nullopt;
}

int64_t PluginOptions::get_int(std::string_view key, int64_t fallback, int64_t min) {
  return opt_int(key, min).value_or(fallback);
}

std::optional<int64_t> PluginOptions::required_int(std::string_view key, int64_t min) {
  const YamlNode* v = node_.is_map() ? node_.find(key) : nullptr;
  if (!v || v->is_null()) {
    known_.emplace_back(key);
    error(key, "missing-option", fmt::format("plugin `{}` needs `{}`", plugin_, key),
          fmt::format("add `{}: <integer>` under plugins.{}", key, plugin_));
    return std::nullopt;
  }
  return opt_int(key, min);
}

std::optional<std::string> PluginOptions::opt_string(std::string_view key) {
  const YamlNode* v = lookup(key);
  if (!v) return std::nullopt;
  if (!v->is_scalar()) {
    type_error(key, *v, "a string");
    return std::nullopt;
  }
  return v->scalar;
}

std::optional<std::string> PluginOptions::required_string(std::string_view key) {
  auto s = opt_string(key);
  bool present = node_.is_map() && node_.find(key) && !node_.find(key)->is_null();
  if (!present)
    error(key, "missing-option", fmt::format("plugin `{}` needs `{}`", plugin_, key),
          fmt::format("add `{}: <name>` under plugins.{}", key, plugin_));
  return s;
}

std::string PluginOptions::get_string(std::string_view key, std::string fallback) {
  return opt_string(key).value_or(std::move(fallback));
}

std::vector<std::string> PluginOptions::get_strings(std::string_view key,
                                                    std::vector<std::string> fallback) {
  const YamlNode* v = lookup(key);
  if (!v) return fallback;
  if (!v->is_sequence()) {
    type_error(key, *v, "a list of strings");
    return fallback;
  }
  std::vector<std::string> out;
  for (const auto& item : v->items) {
    if (!item.is_scalar()) {
      type_error(key, item, "a list of strings");
      return fallback;
    }
    out.push_back(item.scalar);
  }
  return out;
}

std::vector<int64_t> PluginOptions::get_ints(std::string_view key, std::vector<int64_t> fallback,
                                             int64_t min) {
  const YamlNode* v = lookup(key);
  if (!v) return fallback;
  if (!v->is_sequence()) {
    type_error(key, *v, "a list of integers");
    return fallback;
  }
  std::vector<int64_t> out;
  for (const auto& item : v->items) {
    auto i = parse_int(item);
    if (!i) {
      type_error(key, item, "a list of integers");
      return fallback;
    }
    if (!in_range(key, *i, min)) return fallback;
    out.push_back(*i);
  }
  return out;
}

void PluginOptions::read_args_options() {
  auto style = opt_string("args_style");
  if (style && *style == "flags") {
    style_ = ArgsStyle::kFlags;
  } else if (style && *style != "hydra") {
    error("args_style", "bad-value",
          fmt::format("`{}` must be hydra or flags, got `{}`{}", path("args_style"), *style,
                      did_you_mean(*style, {"hydra", "flags"})));
  }
  read_args_map();
}

void PluginOptions::read_args_map() {
  const YamlNode* m = lookup("args_map");
  if (!m) return;
  if (!m->is_map()) {
    type_error("args_map", *m, "a mapping {hydra.key: --flag-name}");
    return;
  }
  for (const auto& e : m->entries) {
    if (!e.value.is_scalar() || e.value.scalar.empty()) {
      type_error("args_map", e.value, "a flag name for every key");
      continue;
    }
    args_map_[e.key] = e.value.scalar;
  }
  if (style_ == ArgsStyle::kHydra)
    diags_.warning("unused-option", path("args_map"), m->loc,
                   fmt::format("`{}` has no effect unless args_style is flags", path("args_map")),
                   "add `args_style: flags` or remove args_map");
}

void PluginOptions::finish() {
  if (!node_.is_map()) return;
  for (const auto& e : node_.entries) {
    if (std::find(known_.begin(), known_.end(), e.key) != known_.end()) continue;
    ++errors_;
    diags_.error("unknown-option", path(e.key), e.key_loc,
                 fmt::format("unknown option `{}` for plugin `{}`{}", e.key, plugin_,
                             did_you_mean(e.key, known_)),
                 "see docs/plugins.md for the options of each plugin");
  }
}

std::string hydra_quote(const std::string& value) {
  if (!value.empty() && std::all_of(value.begin(), value.end(), hydra_safe)) return value;
  std::string out = "'";
  for (char c : value) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

void ArgWriter::add_bool(std::string_view key, bool value, std::string reason) {
  std::string text = value ? "true" : "false";
  emit(key, text, text, value, std::move(reason));
}

void ArgWriter::add_int(std::string_view key, int64_t value, std::string reason) {
  emit(key, std::to_string(value), std::to_string(value), std::nullopt, std::move(reason));
}

void ArgWriter::add_string(std::string_view key, const std::string& value, std::string reason) {
  emit(key, hydra_quote(value), value, std::nullopt, std::move(reason));
}

void ArgWriter::add_int_list(std::string_view key, const std::vector<int64_t>& values,
                             std::string reason) {
  emit(key, "[" + join_ints(values) + "]", join_ints(values), std::nullopt, std::move(reason));
}

void ArgWriter::emit(std::string_view key, const std::string& hydra_value,
                     const std::string& flag_value, std::optional<bool> boolean,
                     std::string reason) {
  if (opts_.args_style() == ArgsStyle::kHydra) {
    out_.push_back(RuntimeArg{fmt::format("{}={}", key, hydra_value), "", std::move(reason)});
    return;
  }
  auto it = opts_.args_map().find(std::string(key));
  if (it == opts_.args_map().end()) {
    opts_.error("args_map", "missing-args-map",
                fmt::format("plugin `{}` emits `{}` but `{}` has no entry for it", opts_.plugin(),
                            key, opts_.path("args_map")),
                fmt::format("add `{}: --your-flag-name` to args_map", key));
    return;
  }
  if (boolean.has_value()) {
    if (*boolean) out_.push_back(RuntimeArg{it->second, "", std::move(reason)});
    return;
  }
  out_.push_back(RuntimeArg{it->second + "=" + flag_value, "", std::move(reason)});
}

}  // namespace bridge
