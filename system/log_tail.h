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
//   not exist (yet) prints nothing, and so does one that is not a regular file (a FIFO, a
//   symlink: opened by system/file_read.h, so that it never blocks or reads a device).
// - What is printed is escaped for a terminal: control characters other than tab, and bytes
//   that are not UTF-8, become `\xNN` (base/utf8.h, printable_text), in the line and in its
//   `[label] ` prefix; `filter` sees the line as written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "system/line_pattern.h"

namespace bridge {

inline constexpr size_t kMaxLineBytes = 1 << 20;

// Which lines `logs --grep REGEX` prints: those in which the (ECMAScript, case-sensitive)
// regular expression finds a match; every line without a pattern. Matched by LinePattern
// (system/line_pattern.h), in time linear in the line: a 1 MiB line is no stack overflow.
class LineFilter {
 public:
  LineFilter() = default;
  // The filter of `pattern`; without one, `error` says why the pattern is not a valid
  // regular expression.
  struct Compiled;
  static Compiled compile(const std::string& pattern);
  bool keep(std::string_view line) const;
  // How many lines a pattern kept so far, over this filter and its copies (an executor may
  // copy the query): `logs` says "no line matched" rather than print nothing.
  size_t kept() const { return *kept_; }

 private:
  std::optional<LinePattern> pattern_;
  std::shared_ptr<size_t> kept_ = std::make_shared<size_t>(0);
};

struct LineFilter::Compiled {
  std::optional<LineFilter> filter;
  std::string error;  // when there is no filter
};

class LogTail {
 public:
  LogTail(std::string label, std::filesystem::path path)
      : label_(std::move(label)), path_(std::move(path)) {}

  // Prints what was appended since the last call; `prefix` writes "[label] " before each line,
  // and only lines `filter` keeps are printed.
  void pump(std::ostream& out, bool prefix, bool final, const LineFilter& filter = LineFilter());
  // Skips all but the last `n` lines of what the file holds now (`logs --tail N`); the next
  // pump starts there. A missing file keeps the tail at its start.
  void start_at_last_lines(size_t n);

  const std::string& label() const { return label_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void emit(std::ostream& out, bool prefix, const LineFilter& filter, const char* data,
            size_t size) const;
  void append_lines(std::ostream& out, bool prefix, const LineFilter& filter,
                    const std::string& piece);

  std::string label_;  // "rank 3 node2", "node 1", "batch", "batch stderr"
  std::filesystem::path path_;
  uint64_t offset_ = 0;
  std::string partial_;  // the start of a line whose '\n' has not been written yet
};

// The last `max_lines` lines of a file, read from at most its last `max_bytes` (a partial
// first line of that window is dropped, lines longer than 4 KiB are cut). `first_line_number`
// gets the 1-based number of the first returned line when the whole file was read, else 0.
// A missing file, or one that is not a regular file (system/file_read.h), gives no lines.
std::vector<std::string> read_last_lines(const std::filesystem::path& path, size_t max_lines,
                                         size_t max_bytes, size_t& first_line_number);

}  // namespace bridge
