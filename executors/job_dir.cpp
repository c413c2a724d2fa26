#include "executors/job_dir.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

#include "plan/code_tree.h"

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

// The snapshot is read-only to the job (docs/recipe.md, "Shipping local code"): a rank that
// appended to a file would make the recorded hash a lie. Files are created 0444 (0555 when
// executable), less what the umask takes; directories lose their write bits once full.
constexpr mode_t kSnapshotFileMode = 0444;
constexpr mode_t kSnapshotExecMode = 0555;

// One file of the snapshot: found through the tree without following a link
// (plan/code_tree.h), streamed in fixed memory into a new file and the hash.
Status copy_one(const CodeTree& tree, const CodeFile& file, const std::string& to, Sha256& hash,
                CodeByteBudget& budget, const CancelToken* cancel) {
  if (file.symlink) {
    StatusOr<CodeEntry> entry = tree.look(file.path);
    if (!entry.ok()) return entry.status();
    if (entry->kind != CodeEntryKind::kLink)
      return Status::failed(fmt::format("{} is no longer a symbolic link", file.path));
    if (symlink(entry->link_target.c_str(), to.c_str()) != 0)
      return Status::failed(fmt::format("cannot create {}: {}", to, std::strerror(errno)));
    hash_code_file(hash, file, entry->link_target);
    return {};
  }
  int out = open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                 file.executable ? kSnapshotExecMode : kSnapshotFileMode);
  if (out < 0) return Status::failed(fmt::format("cannot create {}: {}", to, std::strerror(errno)));
  CodeChunkSink sink = [&](std::string_view chunk) {
    if (write_all(out, chunk.data(), chunk.size())) return Status();
    return Status::failed(fmt::format("cannot write {}: {}", to, std::strerror(errno)));
  };
  Status copied = tree.stream(file, hash, sink, cancel, budget);
  if (close(out) != 0 && copied.ok())
    return Status::failed(fmt::format("cannot write {}: {}", to, std::strerror(errno)));
  return copied;
}

// The directories of `rel` below the snapshot, deepest first when iterated in reverse.
void add_parents(const std::string& rel, std::set<std::string>& dirs) {
  for (size_t slash = rel.find('/'); slash != std::string::npos; slash = rel.find('/', slash + 1))
    dirs.insert(rel.substr(0, slash));
}

// Takes the write bits off the snapshot's directories, deepest first, then its root.
Status seal_directories(const std::string& root, const std::set<std::string>& dirs) {
  std::vector<std::string> order(dirs.rbegin(), dirs.rend());
  order.emplace_back();
  for (const std::string& rel : order) {
    std::string path = rel.empty() ? root : root + "/" + rel;
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        chmod(path.c_str(), st.st_mode & 07555) != 0)
      return Status::failed(
          fmt::format("cannot make {} read-only: {}", path, std::strerror(errno)));
  }
  return {};
}

// Removes a snapshot being made unless it was finished: every way out of the copy (a failed
// file, a cancellation, an exception) leaves nothing behind.
class PartialSnapshot {
 public:
  explicit PartialSnapshot(std::string dir) : dir_(std::move(dir)) {}
  ~PartialSnapshot() {
    if (!done_) remove_code_snapshot(dir_);
  }
  PartialSnapshot(const PartialSnapshot&) = delete;
  PartialSnapshot& operator=(const PartialSnapshot&) = delete;
  void finished() { done_ = true; }

 private:
  std::string dir_;
  bool done_ = false;
};

}  // namespace

StatusOr<CopiedCode> copy_code_snapshot(const std::string& source,
                                        const std::vector<CodeFile>& files,
                                        const std::string& parent, const std::string& leaf,
                                        const CodeCopyOptions& options) {
  StatusOr<CodeTree> tree = CodeTree::open(source);
  if (!tree.ok()) return tree.status();
  StatusOr<std::string> made = make_own_job_dir(parent, leaf);
  if (!made.ok()) return made.status();
  PartialSnapshot partial(*made);
  CopiedCode copied;
  copied.dir = *made;
  Sha256 hash;
  CodeByteBudget budget{options.max_bytes};
  std::set<std::string> dirs;
  for (const CodeFile& file : files) {
    fs::path to = fs::path(copied.dir) / file.path;
    std::error_code ec;
    // Directories below the new one: nobody else can write there (mode 0755, ours).
    fs::create_directories(to.parent_path(), ec);
    add_parents(file.path, dirs);
    Status one = ec ? Status::failed(fmt::format("cannot create {}: {}", to.parent_path().string(),
                                                 ec.message()))
                    : copy_one(*tree, file, to.string(), hash, budget, options.cancel);
    if (!one.ok()) return one;
    ++copied.files;
  }
  if (Status sealed = seal_directories(copied.dir, dirs); !sealed.ok()) return sealed;
  copied.bytes = budget.read;
  copied.hash = hash.hex();
  partial.finished();
  return copied;
}

void remove_code_snapshot(const std::string& dir) {
  std::error_code ec;
  // Its directories are read-only (seal_directories): their entries cannot be removed until
  // they are writable again. Links are not followed.
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add, ec);
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code kind;
    if (it->is_directory(kind) && !it->is_symlink(kind))
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, kind);
  }
  fs::remove_all(dir, ec);
}

}  // namespace bridge
