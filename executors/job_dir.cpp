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

namespace {

bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

Status write_job_files(const std::string& dir,
                       const std::vector<std::pair<std::string, std::string>>& files) {
  for (const auto& [name, contents] : files) {
    std::string path = dir + "/" + name;
    int fd = create_job_file(path);
    bool ok = fd >= 0 && write_all(fd, contents.data(), contents.size());
    int err = errno;
    if (fd >= 0 && close(fd) != 0 && ok) {
      ok = false;
      err = errno;
    }
    if (!ok) return Status::failed(fmt::format("cannot write {}: {}", path, std::strerror(err)));
  }
  return Status();
}

namespace {

// One file of the snapshot: read without following a link, written new; its bytes hashed.
Status copy_one(const std::string& from, const std::string& to, const CodeFile& file, Sha256& hash,
                std::uint64_t& bytes) {
  if (file.symlink) {
    std::error_code ec;
    fs::path target = fs::read_symlink(from, ec);
    if (ec) return Status::failed(fmt::format("cannot read the link {}: {}", from, ec.message()));
    if (symlink(target.c_str(), to.c_str()) != 0)
      return Status::failed(fmt::format("cannot create {}: {}", to, std::strerror(errno)));
    hash_code_file(hash, file, target.string());
    return {};
  }
  int in = open(from.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0) return Status::failed(fmt::format("cannot read {}: {}", from, std::strerror(errno)));
  int out = create_job_file(to);
  if (out < 0 || (file.executable && fchmod(out, 0755) != 0)) {
    int err = errno;
    close(in);
    if (out >= 0) close(out);
    return Status::failed(fmt::format("cannot create {}: {}", to, std::strerror(err)));
  }
  std::string content;
  char buffer[1 << 16];
  ssize_t n = 0;
  bool wrote = true;
  while ((n = read(in, buffer, sizeof buffer)) > 0 || (n < 0 && errno == EINTR)) {
    if (n < 0) continue;
    content.append(buffer, static_cast<size_t>(n));
    wrote = wrote && write_all(out, buffer, static_cast<size_t>(n));
  }
  int err = errno;
  close(in);
  bool closed = close(out) == 0;
  if (n < 0) return Status::failed(fmt::format("cannot read {}: {}", from, std::strerror(err)));
  if (!wrote || !closed)
    return Status::failed(fmt::format("cannot write {}: {}", to, std::strerror(errno)));
  hash_code_file(hash, file, content);
  bytes += content.size();
  return {};
}

}  // namespace

StatusOr<CopiedCode> copy_code_snapshot(const std::string& source,
                                        const std::vector<CodeFile>& files,
                                        const std::string& parent, const std::string& leaf) {
  StatusOr<std::string> made = make_own_job_dir(parent, leaf);
  if (!made.ok()) return made.status();
  CopiedCode copied;
  copied.dir = *made;
  Sha256 hash;
  for (const CodeFile& file : files) {
    fs::path to = fs::path(copied.dir) / file.path;
    std::error_code ec;
    // Directories below the new one: nobody else can write there (mode 0755, ours).
    fs::create_directories(to.parent_path(), ec);
    Status one = ec ? Status::failed(fmt::format("cannot create {}: {}", to.parent_path().string(),
                                                 ec.message()))
                    : copy_one(source + "/" + file.path, to.string(), file, hash, copied.bytes);
    if (!one.ok()) {
      remove_code_snapshot(copied.dir);
      return one;
    }
    ++copied.files;
  }
  copied.hash = hash.hex();
  return copied;
}

void remove_code_snapshot(const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace bridge
