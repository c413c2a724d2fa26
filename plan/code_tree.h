// CodeTree: the one walker of a runtime.code tree (plan/code_plan.h). Whatever the tree
// holds, nothing outside it is ever read through it.
//
// Contract:
// - The root is opened once (a link there is followed: the path is the user's own choice);
//   every path below it is reached one component at a time, each opened with openat and
//   O_NOFOLLOW. A directory on the way that is a symbolic link is reported
//   (CodeEntryKind::kThroughLink, with the link's path), never entered: a tracked `conf/`
//   replaced by `conf -> ../outside` cannot ship `outside/creds`. A path holding `..`, `.`
//   or an empty component is refused the same way.
// - Only regular files are read, and each in fixed memory: stream() reads the size fstat
//   gives for the open file in chunks of kCodeChunkBytes, hashes them and hands them to a
//   sink; a file that ends early or still has bytes after that size (it changed, or it is no
//   real file: procfs reports size 0 and reads without end) is an error, so the bytes hashed
//   and copied are the bytes counted. CodeByteBudget counts them against
//   runtime.code.max_size_mb.
// - A CancelToken (system/cancel_token.h) is looked at before every chunk; a cancelled one
//   stops the read with a failed Status, and the caller cleans up.
// Errors are values (base/status.h): one sentence naming the file and why.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/sha256.h"
#include "base/status.h"
#include "plan/code_plan.h"
#include "system/cancel_token.h"

namespace bridge {

// The most entries list_files reads: far more than any source tree (Megatron-LM has about
// 3,000 files), and a bound on the memory a listing of the wrong directory takes.
inline constexpr std::size_t kCodeListLimit = 1'000'000;

// 64 KiB: the memory a file's read and hash take, whatever its size.
inline constexpr std::size_t kCodeChunkBytes = std::size_t{1} << 16;

enum class CodeEntryKind {
  kMissing,      // not there (an uncommitted deletion), or a file where a directory was
  kFile,         // a regular file
  kLink,         // a symbolic link: shipped as a link, its target text, never followed
  kOther,        // a directory, FIFO, socket or device: never shipped
  kThroughLink,  // a directory on the way is a symbolic link (`link` says which)
};

struct CodeEntry {
  CodeEntryKind kind = CodeEntryKind::kMissing;
  std::uint64_t size = 0;  // kFile: its size now
  bool executable = false;
  std::string link_target;  // kLink
  std::string link;         // kThroughLink: the link's path relative to the tree
};

// The snapshot's running byte count against runtime.code.max_size_mb, from bytes read.
struct CodeByteBudget {
  std::uint64_t left = 0;    // what the snapshot may still take
  std::uint64_t read = 0;    // what was read so far
  std::uint64_t wanted = 0;  // set when a file did not fit: `read` plus that file's size
};

// Receives each chunk of a streamed file; a failed Status stops the stream.
using CodeChunkSink = std::function<Status(std::string_view)>;

class CodeTree {
 public:
  static StatusOr<CodeTree> open(const std::string& root);
  CodeTree(CodeTree&& other) noexcept;
  CodeTree& operator=(CodeTree&& other) noexcept;
  CodeTree(const CodeTree&) = delete;
  CodeTree& operator=(const CodeTree&) = delete;
  ~CodeTree();

  const std::string& root() const { return root_path_; }

  // What `rel` ('/'-separated, relative) is, found without following any link.
  StatusOr<CodeEntry> look(std::string_view rel) const;

  // Every entry below the root that is not a directory (files, links, FIFOs, ...), as
  // '/'-separated relative paths, for a tree git does not list. Directories are entered
  // with openat and O_NOFOLLOW, so a directory link is listed as an entry, never entered;
  // an entry named `.git` is skipped with all it holds. At most kCodeListLimit entries.
  StatusOr<std::vector<std::string>> list_files() const;

  // Streams the regular file `file.path` into `hash` (hash_code_header, then its bytes) and
  // `sink` (may be empty), counting its bytes in `budget`. A file larger than what is left
  // is not read (budget.wanted says how much the snapshot would have been).
  Status stream(const CodeFile& file, Sha256& hash, const CodeChunkSink& sink,
                const CancelToken* cancel, CodeByteBudget& budget) const;

 private:
  CodeTree(int fd, std::string path) : root_(fd), root_path_(std::move(path)) {}
  // The directory holding `rel`'s last component, opened without following a link: its
  // descriptor, or -1 with `entry` saying why (missing, through a link); a failure for a path
  // that is refused or a directory that cannot be opened.
  StatusOr<int> open_parent(std::string_view rel, CodeEntry& entry) const;

  int root_ = -1;
  std::string root_path_;
};

// Whether a file's name looks like a secret (.env, id_rsa, *.pem, .netrc, credentials, ...):
// such a file is not shipped by a glob unless named on purpose (docs/recipe.md).
bool looks_like_secret(std::string_view rel);

}  // namespace bridge
