// PluginOptions: the typed reader for one plugin's option mapping, and ArgWriter, which
// writes the plugin's runtime arguments in the style the user chose.
//
// Every getter records its key as known; finish() then rejects every other key with a
// did-you-mean. Wrong types, out-of-range values and missing required options are errors
// with path "plugins.<plugin>.<option>" and the option's location (the plugin's own
// location when the option is absent). Null means "not set", as elsewhere in recipes. The
// common options `args_style: hydra|flags` and `args_map: {hydra.key: --flag}` are read by
// the constructor, so every plugin accepts them. ArgWriter emits `key=value` (Hydra style,
// lowercase booleans, lists as `[a,b]`, strings single-quoted when they hold characters
// Hydra treats specially) or, with flags, `--flag` for true, nothing for false and
// `--flag=value` otherwise (lists as `a,b`); a key without an args_map entry is an error.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/diagnostics.h"
#include "base/yaml_tree.h"
#include "model/launch_env.h"

namespace bridge {

enum class ArgsStyle { kHydra, kFlags };

class PluginOptions {
 public:
  PluginOptions(std::string plugin, const YamlNode& options, SourceLoc plugin_loc,
                Diagnostics& diags);

  bool get_bool(std::string_view key, bool fallback);
  std::optional<int64_t> opt_int(std::string_view key, int64_t min);
  int64_t get_int(std::string_view key, int64_t fallback, int64_t min);
  std::optional<int64_t> required_int(std::string_view key, int64_t min);
  std::optional<std::string> opt_string(std::string_view key);
  std::optional<std::string> required_string(std::string_view key);
  std::string get_string(std::string_view key, std::string fallback);
  std::vector<std::string> get_strings(std::string_view key, std::vector<std::string> fallback);
  std::vector<int64_t> get_ints(std::string_view key, std::vector<int64_t> fallback, int64_t min);

  // Rejects every key no getter asked for. Call once, after the last getter.
  void finish();

  const std::string& plugin() const { return plugin_; }
  std::string path(std::string_view key) const;  // "plugins.<plugin>.<key>"
  std::string plugin_path() const;               // "plugins.<plugin>"
  SourceLoc loc(std::string_view key) const;     // the value's location, else the plugin's
  const SourceLoc& plugin_loc() const { return plugin_loc_; }
  bool ok() const { return errors_ == 0; }  // no error recorded by this reader
  void error(std::string_view key, std::string code, std::string message, std::string help = {});
  Diagnostics& diags() { return diags_; }

  ArgsStyle args_style() const { return style_; }
  const std::map<std::string, std::string>& args_map() const { return args_map_; }

 private:
  const YamlNode* lookup(std::string_view key);
  void type_error(std::string_view key, const YamlNode& v, const char* expected);
  bool in_range(std::string_view key, int64_t value, int64_t min);
  void read_args_options();
  void read_args_map();

  std::string plugin_;
  const YamlNode& node_;
  SourceLoc plugin_loc_;
  Diagnostics& diags_;
  std::vector<std::string> known_;
  int errors_ = 0;
  ArgsStyle style_ = ArgsStyle::kHydra;
  std::map<std::string, std::string> args_map_;
};

class ArgWriter {
 public:
  ArgWriter(PluginOptions& opts, std::vector<RuntimeArg>& out) : opts_(opts), out_(out) {}

  void add_bool(std::string_view key, bool value, std::string reason);
  void add_int(std::string_view key, int64_t value, std::string reason);
  void add_string(std::string_view key, const std::string& value, std::string reason);
  void add_int_list(std::string_view key, const std::vector<int64_t>& values, std::string reason);

 private:
  // `hydra_value` is the Hydra spelling, `flag_value` the one used after `--flag=`.
  void emit(std::string_view key, const std::string& hydra_value, const std::string& flag_value,
            std::optional<bool> boolean, std::string reason);

  PluginOptions& opts_;
  std::vector<RuntimeArg>& out_;
};

// A value as Hydra reads it: kept as is when made of safe characters, else single-quoted.
std::string hydra_quote(const std::string& value);

}  // namespace bridge
