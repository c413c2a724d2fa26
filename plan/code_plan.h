// runtime.code: a local source tree shipped into the job, planned and inspected.
//
// Two modes (docs/recipe.md, "runtime.code"):
//   snapshot  the tree's files are copied once, at submission, into a directory of their own
//             on the shared file system (<job dir>/code/<job id>; Kubernetes:
//             runtime.code.snapshot_dir/<name>/<job id>): the job runs that copy, whatever
//             happens to the tree afterwards. Which files: in a git work tree, the files git
//             tracks, as they are on disk (uncommitted changes included, untracked files not);
//             outside git, the files matching runtime.code.include. include also narrows a
//             git tree's files.
//   mount     the tree itself, as it is (nothing copied, no hash).
// Where the ranks see it: inside a container (Slurm with runtime.container_image, every
// Kubernetes pod) the directory is mounted at container_path (megatron_bridge adapter: the
// Megatron-Bridge sources of NVIDIA's NeMo containers, /opt/Megatron-Bridge); without one
// (local, Slurm without an image) <dir>/<python_path> is put first on PYTHONPATH. Every rank
// gets BRIDGE_CODE_DIR, the directory as it sees it.
//
// Contract:
// - resolve_code_plan is pure (the host env for `~` and ${VAR}): defaults and paths only.
// - inspect_code reads the tree (git through the CommandRunner seam, never a process of its
//   own; the file system for sizes and, with CodeDepth::kHash, contents) and records every
//   problem as a diagnostic at runtime.code's file:line:col with a help line: a missing or
//   unreadable path, a tree that is no git work tree and has no include list, a snapshot
//   over max_size_mb (the measured size in the message), a listed file behind a directory
//   that is a symbolic link (code-path-through-link), a secret-looking file an include glob
//   picked up outside git (code-secret-file; tracked: a warning). Every path is read
//   through CodeTree (plan/code_tree.h): never outside the tree, in fixed memory. It writes
//   nothing.
// - The hash (SHA-256) covers each shipped file's path, kind (file, executable, symlink) and
//   bytes, in path order: the same tree gives the same hash wherever it is copied to.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/diagnostics.h"
#include "base/sha256.h"
#include "model/executor_kind.h"
#include "model/recipe.h"
#include "system/command_runner.h"
#include "system/host_env.h"

namespace bridge {

// A snapshot larger than this many MiB is refused unless runtime.code.max_size_mb allows it:
// Megatron-Bridge's tracked files are a few tens of MiB; a tree ten times that is most likely
// data or checkpoints that belong on a volume, and every submission copies it again.
inline constexpr int64_t kDefaultCodeMaxSizeMb = 512;
// Where NVIDIA's NeMo containers keep Megatron-Bridge's sources (an editable install):
// runtime.code's default container_path under the megatron_bridge adapter.
inline constexpr std::string_view kMegatronBridgeContainerPath = "/opt/Megatron-Bridge";
// The default container_path under any other adapter.
inline constexpr std::string_view kDefaultCodeContainerPath = "/opt/bridge-launch/code";

enum class CodeMode { kSnapshot, kMount };
const char* code_mode_name(CodeMode mode);

struct CodeFile {
  std::string path;        // relative to the tree, '/'-separated
  std::uint64_t size = 0;  // a regular file's bytes; 0 for a link (it holds no data)
  bool executable = false;
  bool symlink = false;  // shipped as a link (its target text), never followed
};

// What inspect_code found.
struct CodeInspection {
  bool git = false;
  std::string commit;           // HEAD; "" outside git or before the first commit
  bool dirty = false;           // tracked files differ from HEAD (staged or not)
  std::vector<CodeFile> files;  // what a snapshot ships, in path order (mount: empty)
  std::uint64_t bytes = 0;      // the regular files' bytes, as the copy counts them
  std::string hash;  // SHA-256 of the snapshot (CodeDepth::kHash, or the copy); "" otherwise
};

struct CodePlan {
  CodeMode mode = CodeMode::kSnapshot;
  std::string source;  // the tree on the submitting host, absolute
  SourceLoc loc;       // runtime.code.path (else the section), for diagnostics
  std::string container_path;
  std::string python_path;  // relative to the tree; "." for the tree itself
  std::vector<std::string> include;
  std::uint64_t max_bytes = 0;
  SourceLoc max_loc;
  // Snapshots go to <snapshot_root>/<job id>, on the submitting host.
  std::string snapshot_root;
  bool in_container = false;  // the ranks run in a container: mounted, not on PYTHONPATH
  std::optional<CodeInspection> inspection;  // set by inspect_code
};

// The plan of runtime.code (nullopt when the recipe has none, or after an error). `job_dir`
// is the plan's job dir (<base>/<name>); `state_root` the host's (system/host_env.h).
std::optional<CodePlan> resolve_code_plan(const Recipe& recipe, const ExecutorKind& kind,
                                          const std::string& job_dir, const std::string& adapter,
                                          const HostEnvironment& env, Diagnostics& diags);

// The directory holding the tree on the submitting host for the submission `job_id` (the
// snapshot's, or the tree itself when mounted).
std::string code_host_dir(const CodePlan& code, const std::string& job_id);
// The directory as every rank sees it (BRIDGE_CODE_DIR).
std::string code_rank_dir(const CodePlan& code, const std::string& job_id);
// What goes first on PYTHONPATH without a container: the rank dir's python_path.
std::string code_python_path(const CodePlan& code, const std::string& job_id);

enum class CodeDepth {
  kList,  // git state, the files and their sizes: validate, a launch (it hashes as it copies)
  kHash,  // and the hash of their contents: plan, --dry-run
};

// Fills code.inspection; false (with diagnostics) when the tree cannot be shipped.
bool inspect_code(CodePlan& code, CommandRunner& runner, CodeDepth depth, Diagnostics& diags);

// Adds one shipped file to a snapshot hash (see the contract above); `content` is the
// file's bytes, or a symlink's target.
void hash_code_file(Sha256& hash, const CodeFile& file, std::string_view content);
// The part of hash_code_file before the bytes, for a file streamed in chunks
// (plan/code_tree.h): `size` bytes must follow.
void hash_code_header(Sha256& hash, const CodeFile& file, std::uint64_t size);

// Whether `path` (relative, '/'-separated) matches the glob `pattern`: `*` and `?` within a
// path component, `**` across components (`**/` also matches no directory at all), a
// pattern without '/' matches the file name in any directory. Time O(|pattern| x |path|)
// for any pattern: the matcher never backtracks.
bool code_path_matches(std::string_view pattern, std::string_view path);

// "4.2 MiB" (binary units, one decimal).
std::string byte_size_text(std::uint64_t bytes);

}  // namespace bridge
