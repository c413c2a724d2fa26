// The one reader of files another process wrote: everything bridge-launch reads back from a
// job dir (the plan confirmation's verdict, Slurm's attempts record, the local exit list, the
// hosts file, rank logs and the batch output). A job dir holds whatever the job, or anyone
// who can write there, put in it: a FIFO, a symlink to /dev/zero, a 300 MB "verdict".
//
// Contract:
// - The last path component is opened with O_NOFOLLOW | O_NONBLOCK: a symlink is refused
//   (it could point at a device or another user's file), and opening a FIFO without a
//   writer returns at once instead of waiting for one.
// - The open file must be a regular file (fstat), else it is refused: a FIFO, socket,
//   device or directory never reaches a read.
// - read_regular_file reads at most `max_bytes`; a larger file is refused, never read in part
//   without saying so. RegularFile::read_at reads a window the caller bounds (log tails).
// - Every failure is a Status naming the file and why, escaped for a terminal; nothing throws.
//   A caller that treats "not there (yet)" and "refused" alike may ignore the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "base/status.h"

namespace bridge {

// An open regular file, read by offset. Closes its descriptor when it goes away.
class RegularFile {
 public:
  RegularFile(RegularFile&& other) noexcept;
  RegularFile& operator=(RegularFile&& other) noexcept;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile();

  // The size now (a log grows while it is read); 0 when fstat fails.
  uint64_t size() const;
  // Up to `max_bytes` from `offset`: fewer at the end of the file, "" past it.
  StatusOr<std::string> read_at(uint64_t offset, size_t max_bytes) const;

 private:
  friend StatusOr<RegularFile> open_regular_file(const std::filesystem::path& path);
  RegularFile(int fd, std::string shown_path) : fd_(fd), shown_path_(std::move(shown_path)) {}

  int fd_ = -1;
  std::string shown_path_;  // escaped, for messages
};

StatusOr<RegularFile> open_regular_file(const std::filesystem::path& path);

// The whole file, when it is a regular file of at most `max_bytes`.
StatusOr<std::string> read_regular_file(const std::filesystem::path& path, size_t max_bytes);

}  // namespace bridge
