#include "executors/job_dir.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace bridge {

namespace fs = std::filesystem;

StatusOr<std::string> make_own_job_dir(const std::string& parent, const std::string& leaf) {
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) {
    return Status::failed(fmt::format("cannot create {}: {}", parent, ec.message()));
  }
  // Opened without following a last-level symlink, then checked and used by descriptor:
  // nothing can swap it between the check and the mkdir.
  int dir = open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) {
    return Status::failed(
        errno == ELOOP || errno == ENOTDIR
            ? fmt::format("{} is a symbolic link or not a directory; bridge-launch does "
                          "not write a job's files through a link in a job dir",
                          parent)
            : fmt::format("cannot open {}: {}", parent, std::strerror(errno)));
  }
  struct stat st {};
  if (fstat(dir, &st) != 0 || st.st_uid != geteuid()) {
    close(dir);
    return Status::failed(
        fmt::format("{} belongs to uid {}, not to this user (uid {}); another user could "
                    "read or replace the job's files there",
                    parent, st.st_uid, geteuid()));
  }
  // Writable by others without the sticky bit: another user could rename the new directory
  // and put a link in its place before the job's files are opened by path.
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
    close(dir);
    return Status::failed(fmt::format(
        "{} is writable by other users (mode {:o}) without the sticky bit; another user could "
        "replace the job's directory there",
        parent, st.st_mode & 07777));
  }
  int made = mkdirat(dir, leaf.c_str(), 0755);
  int err = errno;
  close(dir);
  if (made != 0) {
    return Status::failed(
        err == EEXIST ? fmt::format("{}/{} already exists; a new submission's directory "
                                    "must be new",
                                    parent, leaf)
                      : fmt::format("cannot create {}/{}: {}", parent, leaf, std::strerror(err)));
  }
  return std::string(parent + "/" + leaf);
}

int create_job_file(const std::string& path) {
  return open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
}

}  // namespace bridge
