// A submission's own directory in a job dir that other users may share, and the files the
// launcher writes there.
//
// `<job_dir>/<name>/<id>`: the `<name>` level must be a real directory of this user (a
// symlink another user planted there, or a directory of theirs, would send the job's files
// into their hands), and `<id>` is created new (ids are unique by construction), so nothing
// can be planted in it beforehand. The launcher's files in it are created with
// O_EXCL | O_NOFOLLOW all the same. Errors are values (base/status.h).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "plan/code_plan.h"
#include "system/cancel_token.h"

namespace bridge {

// Creates `parent` (the user's job dir and the recipe's name below it; symlinks above the
// last level are the user's own choice and are followed), checks that its last level is a
// directory owned by this user, not a symlink, then creates `parent/leaf` anew. Returns the
// new directory, or a failed Status saying why ("... is a symbolic link", "... belongs to
// uid N", "... already exists", or the system's error).
StatusOr<std::string> make_own_job_dir(const std::string& parent, const std::string& leaf);

// Opens a new file for writing (O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode 0644): a
// file or symlink already there is an error (EEXIST), never written through. -1 with errno
// set on failure.
int create_job_file(const std::string& path);

// Writes each (name, contents) as a new file in `dir` (create_job_file). Stops at the first
// failure and says which file and why.
Status write_job_files(const std::string& dir,
                       const std::vector<std::pair<std::string, std::string>>& files);

// What copy_code_snapshot wrote.
struct CopiedCode {
  std::string dir;
  std::string hash;  // SHA-256 of the bytes written (hash_code_file, plan/code_plan.h)
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;
};

// What a copy may take and who may stop it.
struct CodeCopyOptions {
  std::uint64_t max_bytes = std::numeric_limits<std::uint64_t>::max();  // runtime.code.max_size_mb
  const CancelToken* cancel = nullptr;  // a cancelled token stops the copy (a signal)
};

// Copies `files` (relative to `source`) into the new directory `parent/leaf`, made as
// make_own_job_dir makes a submission's directory. Every source path is found through the
// tree without following a link (plan/code_tree.h: never a byte from outside it); regular
// files are streamed in fixed memory into new files (O_EXCL | O_NOFOLLOW), a symlink is made
// again with its target text, never followed. The copy is read-only: files 0444 (0555 for
// executables) and directories 0555, less what the umask takes. The hash covers the bytes
// as written, and `bytes` counts them against max_bytes. On failure, cancellation or an
// exception the partial copy is removed; the Status says which file and why.
StatusOr<CopiedCode> copy_code_snapshot(const std::string& source,
                                        const std::vector<CodeFile>& files,
                                        const std::string& parent, const std::string& leaf,
                                        const CodeCopyOptions& options = {});

// Removes a snapshot copy_code_snapshot made (a submission that was not accepted), making
// its read-only directories writable first.
void remove_code_snapshot(const std::string& dir);

}  // namespace bridge
