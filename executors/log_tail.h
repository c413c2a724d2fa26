// LogTail: the one log tailer. Reads a file that another process appends to and prints what
// is new since the last call, line by line. Used for rank logs (local, Slurm), node logs and
// Slurm's batch output.
//
// Contract:
// - Only whole lines are printed while the writer may still append; `final` also prints an
//   unfinished last line (with a '\n' added), so `logs` of a finished job shows everything
//   and `logs -f` never shows half a line that later continues.
// - Memory stays bounded: the file is read in 1 MiB pieces, and a line longer than
//   kMaxLineBytes is printed in pieces of that size (each ended by '\n').
// - A file that shrank (truncated, rotated) is read again from the start; a file that does
//   not exist (yet) prints nothing.
#pragma once

#include <cstddef>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace bridge {

inline constexpr size_t kMaxLineBytes = 1 << 20;

class LogTail {
 public:
  LogTail(std::string label, std::filesystem::path path)
      : label_(std::move(label)), path_(std::move(path)) {}

  // Prints what was appended since the last call; `prefix` writes "[label] " before each line.
  void pump(std::ostream& out, bool prefix, bool final);

  const std::string& label() const { return label_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void emit(std::ostream& out, bool prefix, const char* data, size_t size) const;

  std::string label_;  // "rank 3", "node 1", "batch", "batch stderr"
  std::filesystem::path path_;
  std::streamoff offset_ = 0;
  std::string partial_;  // the start of a line whose '\n' has not been written yet
};

// The last `max_lines` lines of a file, read from at most its last `max_bytes` (a partial
// first line of that window is dropped, lines longer than 4 KiB are cut). `first_line_number`
// gets the 1-based number of the first returned line when the whole file was read, else 0.
// A missing file gives no lines.
std::vector<std::string> read_last_lines(const std::filesystem::path& path, size_t max_lines,
                                         size_t max_bytes, size_t& first_line_number);

}  // namespace bridge
