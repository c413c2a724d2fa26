#include "system/file_read.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "base/utf8.h"

namespace bridge {

namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

}  // namespace

RegularFile::RegularFile(RegularFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), shown_path_(std::move(other.shown_path_)) {}

RegularFile& RegularFile::operator=(RegularFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    shown_path_ = std::move(other.shown_path_);
  }
  return *this;
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) close(fd_);
}

uint64_t RegularFile::size() const {
  struct stat st {};
  if (fstat(fd_, &st) != 0 || st.st_size < 0) return 0;
  return static_cast<uint64_t>(st.st_size);
}

StatusOr<std::string> RegularFile::read_at(uint64_t offset, size_t max_bytes) const {
  std::string out(max_bytes, '\0');
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return Status::failed(fmt::format("cannot read {}: {}", shown_path_, std::strerror(errno)));
    if (n == 0) break;  // the end (a file that shrank while we read: what is there)
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return out;
}

StatusOr<RegularFile> open_regular_file(const std::filesystem::path& path) {
  std::string shown = printable_text(path.string(), 1000);
  // O_NONBLOCK: a FIFO opens at once, without a writer, so that it can be refused below.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0 && errno == ELOOP)
    return Status::failed(
        fmt::format("{} is a symbolic link; a job's files are read only as regular files", shown));
  if (fd < 0) return Status::failed(fmt::format("cannot open {}: {}", shown, std::strerror(errno)));
  RegularFile file(fd, shown);
  struct stat st {};
  if (fstat(fd, &st) != 0)
    return Status::failed(fmt::format("cannot stat {}: {}", shown, std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    return Status::failed(
        fmt::format("{} is {}, not a regular file", shown, file_kind(st.st_mode)));
  return file;
}

StatusOr<std::string> read_regular_file(const std::filesystem::path& path, size_t max_bytes) {
  StatusOr<RegularFile> file = open_regular_file(path);
  if (!file.ok()) return file.status();
  uint64_t size = file->size();
  if (size > max_bytes)
    return Status::failed(fmt::format("{} has {} bytes, more than the {} it may hold",
                                      printable_text(path.string(), 1000), size, max_bytes));
  return file->read_at(0, static_cast<size_t>(size));
}

}  // namespace bridge
