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
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "plan/code_plan.h"

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

// Copies `files` (relative to `source`) into the new directory `parent/leaf`, made as
// make_own_job_dir makes a submission's directory: regular files are created anew
// (create_job_file; mode 0755 for executables), a symlink is made again with its target text,
// never followed; a source file is opened without following a link either. The hash covers
// the bytes as written. On failure the partial copy is removed and the Status says which file
// and why.
StatusOr<CopiedCode> copy_code_snapshot(const std::string& source,
                                        const std::vector<CodeFile>& files,
                                        const std::string& parent, const std::string& leaf);

// Removes a snapshot copy_code_snapshot made (a submission that was not accepted).
void remove_code_snapshot(const std::string& dir);

}  // namespace bridge
