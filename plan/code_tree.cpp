#include "plan/code_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <utility>

#include "base/utf8.h"

namespace bridge {

namespace {

// Closes a descriptor at scope end (the walker opens one per path component).
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

std::string shown(std::string_view rel) { return printable_text(std::string(rel), 200); }

bool bad_component(std::string_view part) { return part.empty() || part == "." || part == ".."; }

}  // namespace

StatusOr<CodeTree> CodeTree::open(const std::string& root) {
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return Status::failed(fmt::format("cannot open {}: {}", shown(root), std::strerror(errno)));
  return CodeTree(fd, root);
}

CodeTree::CodeTree(CodeTree&& other) noexcept
    : root_(std::exchange(other.root_, -1)), root_path_(std::move(other.root_path_)) {}

CodeTree& CodeTree::operator=(CodeTree&& other) noexcept {
  if (this != &other) {
    if (root_ >= 0) close(root_);
    root_ = std::exchange(other.root_, -1);
    root_path_ = std::move(other.root_path_);
  }
  return *this;
}

CodeTree::~CodeTree() {
  if (root_ >= 0) close(root_);
}

StatusOr<int> CodeTree::open_parent(std::string_view rel, CodeEntry& entry) const {
  Fd dir(dup(root_));
  if (dir.get() < 0)
    return Status::failed(
        fmt::format("cannot open {}: {}", shown(root_path_), std::strerror(errno)));
  size_t at = 0;
  for (size_t slash = rel.find('/'); slash != std::string_view::npos;
       at = slash + 1, slash = rel.find('/', at)) {
    std::string part(rel.substr(at, slash - at));
    if (bad_component(part))
      return Status::failed(fmt::format("{} is no plain path inside the tree", shown(rel)));
    int next = openat(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next >= 0) {
      dir.reset(next);
      continue;
    }
    int err = errno;
    struct stat st {};
    if (fstatat(dir.get(), part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
      entry.kind = CodeEntryKind::kThroughLink;
      entry.link = std::string(rel.substr(0, slash));
    } else if (err == ENOENT || err == ENOTDIR) {
      entry.kind = CodeEntryKind::kMissing;
    } else {
      return Status::failed(fmt::format("cannot open {} in the tree: {}",
                                        shown(rel.substr(0, slash)), std::strerror(err)));
    }
    return -1;
  }
  if (bad_component(rel.substr(at)))
    return Status::failed(fmt::format("{} is no plain path inside the tree", shown(rel)));
  return dir.release();
}

StatusOr<CodeEntry> CodeTree::look(std::string_view rel) const {
  CodeEntry entry;
  StatusOr<int> parent = open_parent(rel, entry);
  if (!parent.ok()) return parent.status();
  Fd dir(*parent);
  if (dir.get() < 0) return entry;
  std::string name(rel.substr(rel.rfind('/') == std::string_view::npos ? 0 : rel.rfind('/') + 1));
  struct stat st {};
  if (fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return entry;
    return Status::failed(
        fmt::format("cannot read {} in the tree: {}", shown(rel), std::strerror(errno)));
  }
  if (S_ISREG(st.st_mode)) {
    entry.kind = CodeEntryKind::kFile;
    entry.size = static_cast<std::uint64_t>(st.st_size);
    entry.executable = (st.st_mode & S_IXUSR) != 0;
  } else if (S_ISLNK(st.st_mode)) {
    std::array<char, 4096> target{};
    ssize_t n = readlinkat(dir.get(), name.c_str(), target.data(), target.size());
    if (n < 0 || static_cast<size_t>(n) >= target.size())
      return Status::failed(fmt::format("cannot read the link {} in the tree: {}", shown(rel),
                                        n < 0 ? std::strerror(errno) : "target too long"));
    entry.kind = CodeEntryKind::kLink;
    entry.link_target.assign(target.data(), static_cast<size_t>(n));
  } else {
    entry.kind = CodeEntryKind::kOther;
  }
  return entry;
}

namespace {

// Reads exactly `size` bytes of `fd` in chunks, then checks that nothing follows.
Status read_chunks(int fd, std::uint64_t size, std::string_view rel, Sha256& hash,
                   const CodeChunkSink& sink, const CancelToken* cancel) {
  std::array<char, kCodeChunkBytes> buffer;  // NOLINT(cppcoreguidelines-pro-type-member-init)
  std::uint64_t left = size;
  while (true) {
    if (cancel && cancel->cancelled())
      return Status::failed(fmt::format("interrupted while reading {}", shown(rel)));
    // One byte past the size at the end: a file that grew is caught, not cut.
    size_t want = left == 0 ? 1 : static_cast<size_t>(std::min<std::uint64_t>(left, buffer.size()));
    ssize_t n = read(fd, buffer.data(), want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return Status::failed(fmt::format("cannot read {}: {}", shown(rel), std::strerror(errno)));
    if (left == 0) {
      if (n == 0) return Status();
      return Status::failed(fmt::format(
          "{} has more bytes than its size of {} B: it changed while being read, or it is no "
          "regular file on disk",
          shown(rel), size));
    }
    if (n == 0)
      return Status::failed(
          fmt::format("{} ended before its size of {} B: it changed while "
                      "being read",
                      shown(rel), size));
    std::string_view chunk(buffer.data(), static_cast<size_t>(n));
    hash.update(chunk);
    if (sink) {
      Status wrote = sink(chunk);
      if (!wrote.ok()) return wrote;
    }
    left -= static_cast<std::uint64_t>(n);
  }
}

}  // namespace

Status CodeTree::stream(const CodeFile& file, Sha256& hash, const CodeChunkSink& sink,
                        const CancelToken* cancel, CodeByteBudget& budget) const {
  CodeEntry entry;
  StatusOr<int> parent = open_parent(file.path, entry);
  if (!parent.ok()) return parent.status();
  Fd dir(*parent);
  if (dir.get() < 0)
    return Status::failed(fmt::format("{} is gone from the tree or now lies behind a symbolic link",
                                      shown(file.path)));
  std::string name = file.path.substr(file.path.rfind('/') + 1);
  // O_NONBLOCK: a FIFO put in the file's place is not waited on (it is refused below).
  Fd in(openat(dir.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (in.get() < 0 || fstat(in.get(), &st) != 0)
    return Status::failed(
        fmt::format("cannot read {}: {}", shown(file.path),
                    errno == ELOOP ? "it is now a symbolic link" : std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    return Status::failed(fmt::format("{} is no longer a regular file", shown(file.path)));
  auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > budget.left) {
    budget.wanted = budget.read + size;
    return Status::failed(fmt::format("{} ({}) takes the snapshot over runtime.code.max_size_mb",
                                      shown(file.path), byte_size_text(size)));
  }
  hash_code_header(hash, file, size);
  Status done = read_chunks(in.get(), size, file.path, hash, sink, cancel);
  if (!done.ok()) return done;
  budget.left -= size;
  budget.read += size;
  return Status();
}

namespace {

bool ends_with(std::string_view text, std::string_view tail) {
  return text.size() >= tail.size() && text.substr(text.size() - tail.size()) == tail;
}

}  // namespace

bool looks_like_secret(std::string_view rel) {
  size_t slash = rel.rfind('/');
  std::string name(rel.substr(slash == std::string_view::npos ? 0 : slash + 1));
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // Names that hold keys, tokens or passwords by convention (ssh, dotenv, netrc, cloud CLIs,
  // package registries); `.env.example` and friends are templates, not secrets.
  static constexpr std::string_view kNames[] = {".env",
                                                ".netrc",
                                                "_netrc",
                                                ".pgpass",
                                                ".git-credentials",
                                                ".pypirc",
                                                ".npmrc",
                                                ".htpasswd",
                                                "credentials",
                                                "credentials.json",
                                                "id_rsa",
                                                "id_dsa",
                                                "id_ecdsa",
                                                "id_ed25519",
                                                ".dockercfg",
                                                "secrets.yaml",
                                                "secrets.json",
                                                "service-account.json",
                                                "kubeconfig"};
  static constexpr std::string_view kSuffixes[] = {".pem", ".key",      ".p12",
                                                   ".pfx", ".keystore", ".jks"};
  static constexpr std::string_view kTemplates[] = {".example", ".sample", ".template", ".dist"};
  if (std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames)) return true;
  if (name.rfind(".env.", 0) == 0)
    return std::none_of(std::begin(kTemplates), std::end(kTemplates),
                        [&](std::string_view t) { return ends_with(name, t); });
  return std::any_of(std::begin(kSuffixes), std::end(kSuffixes),
                     [&](std::string_view s) { return ends_with(name, s); });
}

StatusOr<std::vector<std::string>> CodeTree::list_files() const {
  struct Open {
    int fd;
    std::string prefix;  // "" at the root, else "dir/sub/"
  };
  std::vector<std::string> out;
  std::vector<Open> todo{{dup(root_), ""}};
  if (todo.back().fd < 0)
    return Status::failed(
        fmt::format("cannot list {}: {}", shown(root_path_), std::strerror(errno)));
  size_t seen = 0;
  Status failure;
  while (!todo.empty()) {
    Open here = std::move(todo.back());
    todo.pop_back();
    DIR* dir = fdopendir(here.fd);  // owns here.fd from now on
    if (dir == nullptr) {
      close(here.fd);
      failure = Status::failed(
          fmt::format("cannot list {}: {}", shown(here.prefix), std::strerror(errno)));
      break;
    }
    while (const dirent* e = readdir(dir)) {
      std::string name = e->d_name;
      if (name == "." || name == ".." || name == ".git") continue;
      if (++seen > kCodeListLimit) {
        failure = Status::failed(
            fmt::format("{} holds more than {} entries", shown(root_path_), kCodeListLimit));
        break;
      }
      int sub = openat(dirfd(dir), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) {
        todo.push_back({sub, here.prefix + name + "/"});
      } else if (errno == ENOTDIR || errno == ELOOP) {  // not a directory, or a link
        out.push_back(here.prefix + name);
      } else {
        failure = Status::failed(
            fmt::format("cannot open {}: {}", shown(here.prefix + name), std::strerror(errno)));
        break;
      }
    }
    closedir(dir);
    if (!failure.ok()) break;
  }
  for (const Open& left : todo) close(left.fd);
  if (!failure.ok()) return failure;
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace bridge
