#include "plan/code_plan.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/utf8.h"
#include "model/expand.h"

namespace bridge {

namespace fs = std::filesystem;

const char* code_mode_name(CodeMode mode) {
  return mode == CodeMode::kMount ? "mount" : "snapshot";
}

namespace {

// The recipe name as one path component (as plan.cpp's job_dir_leaf).
std::string path_leaf(const std::string& text) {
  std::string leaf;
  for (char c : text) leaf += (c == '/' || c == ':' || c == ',' || c == '\\') ? '-' : c;
  if (leaf.empty() || leaf.front() == '.') leaf.insert(0, "_");
  return leaf;
}

// python_path: a directory inside the tree.
bool inside_tree(const std::string& relative) {
  if (relative.empty() || relative.front() == '/') return false;
  for (const auto& part : fs::path(relative))
    if (part == "..") return false;
  return true;
}

std::string absolute_from(const std::string& path, const HostEnvironment& env) {
  if (!path.empty() && path.front() == '/') return fs::path(path).lexically_normal().string();
  return (fs::path(env.current_directory()) / path).lexically_normal().string();
}

std::string snapshot_root(const CodeSpec& c, const ExecutorKind& kind, const std::string& job_dir,
                          const std::string& name, const HostEnvironment& env, Diagnostics& diags) {
  // A job dir inside the container (Kubernetes) is no place on this host: the snapshot goes
  // to a directory of the submitting host that the nodes see (a hostPath volume).
  if (!kind.job_dir_in_container) return job_dir + "/code";
  std::string raw = c.snapshot_dir.get_or(state_root(env) + "/code");
  auto dir = expand_path(raw, env, "runtime.code.snapshot_dir", c.snapshot_dir.loc, diags);
  return absolute_from(dir.value_or(raw), env) + "/" + path_leaf(name);
}

// container_path is one field of a mount (`HOST:PATH:ro` for pyxis, a comma-separated list
// of those; a Kubernetes mountPath, which may not hold ':'): "/opt/code:rw" rendered
// `...:/opt/code:rw:ro`, another mount's flags.
bool container_path_ok(const CodeSpec& c, Diagnostics& diags) {
  if (!c.container_path.is_set()) return true;
  const std::string& path = *c.container_path.value;
  size_t bad = path.find_first_of(":,");
  bool control = std::any_of(path.begin(), path.end(), [](char ch) {
    return static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f;
  });
  if (bad == std::string::npos && !control) return true;
  diags.error("bad-value", "runtime.code.container_path", c.container_path.loc,
              fmt::format("`runtime.code.container_path` `{}` holds {}: it is one path of a "
                          "container mount, where ':' separates mount fields and ',' mounts",
                          printable_text(path, 80),
                          bad == std::string::npos ? std::string("a control character")
                                                   : fmt::format("'{}'", path[bad])),
              "write the path alone, e.g. container_path: /opt/code; the snapshot is always "
              "mounted read-only");
  return false;
}

}  // namespace

std::optional<CodePlan> resolve_code_plan(const Recipe& recipe, const ExecutorKind& kind,
                                          const std::string& job_dir, const std::string& adapter,
                                          const HostEnvironment& env, Diagnostics& diags) {
  const CodeSpec& c = recipe.runtime.code;
  if (!c.path.is_set()) return std::nullopt;
  CodePlan code;
  code.mode = c.mode.get_or("snapshot") == "mount" ? CodeMode::kMount : CodeMode::kSnapshot;
  code.loc = c.path.loc;
  auto source = expand_path(*c.path.value, env, "runtime.code.path", c.path.loc, diags);
  if (!source) return std::nullopt;
  code.source = absolute_from(*source, env);
  while (code.source.size() > 1 && code.source.back() == '/') code.source.pop_back();
  bool megatron_bridge = adapter == "megatron_bridge";
  code.container_path = c.container_path.get_or(
      std::string(megatron_bridge ? kMegatronBridgeContainerPath : kDefaultCodeContainerPath));
  if (!container_path_ok(c, diags)) return std::nullopt;
  // Megatron-Bridge's package lives in src/ (src/megatron/bridge) of its repository.
  code.python_path = c.python_path.get_or(megatron_bridge ? "src" : ".");
  if (!inside_tree(code.python_path)) {
    diags.error("bad-value", "runtime.code.python_path", c.python_path.loc,
                fmt::format("`runtime.code.python_path` must be a directory inside the tree, "
                            "got `{}`",
                            printable_text(code.python_path, 80)),
                "write a relative path such as `src`, or `.` for the tree itself");
    return std::nullopt;
  }
  code.include = c.include.get_or({});
  code.max_bytes = static_cast<std::uint64_t>(c.max_size_mb.get_or(kDefaultCodeMaxSizeMb)) << 20;
  code.max_loc = c.max_size_mb.is_set() ? c.max_size_mb.loc : c.section;
  code.snapshot_root = snapshot_root(c, kind, job_dir, recipe.name.get_or("job"), env, diags);
  code.in_container = kind.ranks_in_image && recipe.runtime.container_image.is_set();
  if (!kind.job_dir_in_container && c.snapshot_dir.is_set())
    diags.dropped("code-snapshot-dir-unused", "runtime.code.snapshot_dir", c.snapshot_dir.loc,
                  fmt::format("runtime.code.snapshot_dir is set, but the {} executor keeps "
                              "snapshots in its job dir ({}): not applied",
                              kind.name, code.snapshot_root),
                  "drop it; it names the host directory of Kubernetes snapshots");
  return code;
}

std::string code_host_dir(const CodePlan& code, const std::string& job_id) {
  if (code.mode == CodeMode::kMount) return code.source;
  return code.snapshot_root + "/" + path_leaf(job_id);
}

std::string code_rank_dir(const CodePlan& code, const std::string& job_id) {
  return code.in_container ? code.container_path : code_host_dir(code, job_id);
}

std::string code_python_path(const CodePlan& code, const std::string& job_id) {
  std::string dir = code_rank_dir(code, job_id);
  return code.python_path == "." ? dir : dir + "/" + code.python_path;
}

void hash_code_header(Sha256& hash, const CodeFile& file, std::uint64_t size) {
  // "<kind> <size> <path>\0<bytes>": the size fences each file off from the next.
  const char* kind = file.symlink ? "link" : file.executable ? "exec" : "file";
  hash.update(fmt::format("{} {} {}", kind, size, file.path));
  hash.update(std::string_view("\0", 1));
}

void hash_code_file(Sha256& hash, const CodeFile& file, std::string_view content) {
  hash_code_header(hash, file, content.size());
  hash.update(content);
}

namespace {

// One piece of a glob: a literal character, `?`, `*` (within a component), `**` (across
// components) or `**/` (no directory, or any number of whole ones).
enum class GlobToken : unsigned char { kChar, kOne, kStar, kStarStar, kDirs };

struct GlobPiece {
  GlobToken token;
  char c;
};

std::vector<GlobPiece> glob_pieces(std::string_view p) {
  std::vector<GlobPiece> out;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p.compare(i, 3, "**/") == 0) {
      out.push_back({GlobToken::kDirs, 0});
      i += 2;
    } else if (p.compare(i, 2, "**") == 0) {
      out.push_back({GlobToken::kStarStar, 0});
      ++i;
    } else {
      GlobToken t = p[i] == '*'   ? GlobToken::kStar
                    : p[i] == '?' ? GlobToken::kOne
                                  : GlobToken::kChar;
      out.push_back({t, p[i]});
    }
  }
  return out;
}

// Adds the states reachable without reading a character: a star may match nothing.
void glob_close(const std::vector<GlobPiece>& pieces, std::vector<char>& states) {
  for (size_t k = 0; k < pieces.size(); ++k)
    if (states[k] && pieces[k].token != GlobToken::kChar && pieces[k].token != GlobToken::kOne)
      states[k + 1] = 1;
}

// The glob as a set of states (state k: the first k pieces matched), advanced one character
// at a time: O(pattern x path) whatever the pattern, never backtracking (`*a*a*a*a*a*a*a*ab`
// against 60 characters took 30 s with the recursive matcher this replaced). `**/` has a
// second state, `inside[k]`: inside a directory name, which only a '/' ends.
bool glob_match(std::string_view p, std::string_view s) {
  const std::vector<GlobPiece> pieces = glob_pieces(p);
  const size_t n = pieces.size();
  std::vector<char> states(n + 1, 0), next(n + 1, 0), inside(n, 0), next_inside(n, 0);
  states[0] = 1;
  glob_close(pieces, states);
  for (char c : s) {
    std::fill(next.begin(), next.end(), 0);
    std::fill(next_inside.begin(), next_inside.end(), 0);
    for (size_t k = 0; k < n; ++k) {
      const GlobPiece& g = pieces[k];
      if (g.token == GlobToken::kDirs && (states[k] || inside[k])) {
        if (c == '/')
          next[k] = 1;  // a whole directory: more may follow, or none
        else
          next_inside[k] = 1;
      }
      if (!states[k]) continue;
      if (g.token == GlobToken::kChar) next[k + 1] |= static_cast<char>(c == g.c);
      if (g.token == GlobToken::kOne) next[k + 1] |= static_cast<char>(c != '/');
      if (g.token == GlobToken::kStar) next[k] |= static_cast<char>(c != '/');
      if (g.token == GlobToken::kStarStar) next[k] = 1;
    }
    glob_close(pieces, next);
    if (std::none_of(next.begin(), next.end(), [](char v) { return v != 0; }) &&
        std::none_of(next_inside.begin(), next_inside.end(), [](char v) { return v != 0; }))
      return false;
    states.swap(next);
    inside.swap(next_inside);
  }
  return states[n] != 0;
}

}  // namespace

bool code_path_matches(std::string_view pattern, std::string_view path) {
  if (pattern.find('/') == std::string_view::npos) {
    size_t slash = path.rfind('/');
    return glob_match(pattern, slash == std::string_view::npos ? path : path.substr(slash + 1));
  }
  if (!pattern.empty() && pattern.front() == '/') pattern.remove_prefix(1);
  return glob_match(pattern, path);
}

std::string byte_size_text(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, kUnits[unit]);
}

}  // namespace bridge
