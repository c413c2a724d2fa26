#include "system/log_tail.h"

#include <algorithm>

#include "base/utf8.h"
#include "system/file_read.h"

namespace bridge {

namespace {
constexpr uint64_t kReadPiece = 1 << 20;
}  // namespace

LineFilter::Compiled LineFilter::compile(const std::string& pattern) {
  LineFilter f;
  if (pattern.empty()) return {f, ""};
  LinePattern::Compiled compiled = LinePattern::compile(pattern);
  if (!compiled.pattern) return {std::nullopt, compiled.error};
  f.pattern_ = std::move(compiled.pattern);
  return {f, ""};
}

bool LineFilter::keep(std::string_view line) const {
  if (!pattern_) return true;
  if (!pattern_->search(line)) return false;
  ++*kept_;
  return true;
}

void LogTail::emit(std::ostream& out, bool prefix, const LineFilter& filter, const char* data,
                   size_t size) const {
  if (!filter.keep(std::string_view(data, size))) return;
  if (prefix) out << '[' << printable_text(label_, 1000) << "] ";
  // A rank's output is any bytes: an escape sequence in it must not drive the terminal.
  out << printable_line(std::string_view(data, size));
  out << '\n';
}

void LogTail::start_at_last_lines(size_t n) {
  StatusOr<RegularFile> file = open_regular_file(path_);
  if (!file.ok()) return;
  uint64_t size = file->size();
  partial_.clear();
  offset_ = size;
  if (n == 0 || size == 0) return;
  // Backwards in pieces: the (n)th newline from the end, not counting one that ends the file,
  // is where the last n lines start. Memory stays at one piece whatever the file's size.
  constexpr uint64_t kPiece = uint64_t{64} * 1024;
  size_t newlines = 0;
  for (uint64_t end = size; end > 0;) {
    uint64_t begin = end > kPiece ? end - kPiece : 0;
    StatusOr<std::string> piece = file->read_at(begin, static_cast<size_t>(end - begin));
    if (!piece.ok()) return;
    for (size_t i = piece->size(); i > 0; --i) {
      uint64_t at = begin + (i - 1);
      if ((*piece)[i - 1] != '\n' || at == size - 1) continue;
      if (++newlines == n) {
        offset_ = at + 1;
        return;
      }
    }
    end = begin;
  }
  offset_ = 0;  // fewer than n lines: all of them
}

void LogTail::pump(std::ostream& out, bool prefix, bool final, const LineFilter& filter) {
  // A rank log that is a FIFO or a link (the job dir is the job's) prints nothing, like a
  // missing one: system/file_read.h.
  if (StatusOr<RegularFile> file = open_regular_file(path_); file.ok()) {
    uint64_t size = file->size();
    if (size < offset_) {  // truncated or replaced: start over
      offset_ = 0;
      partial_.clear();
    }
    while (offset_ < size) {
      StatusOr<std::string> piece =
          file->read_at(offset_, static_cast<size_t>(std::min(kReadPiece, size - offset_)));
      if (!piece.ok() || piece->empty()) break;
      offset_ += piece->size();
      append_lines(out, prefix, filter, *piece);
    }
  }
  if (final && !partial_.empty()) {
    emit(out, prefix, filter, partial_.data(), partial_.size());
    partial_.clear();
  }
  out.flush();
}

// Whole lines of partial_ + piece are printed; the rest waits for its newline.
void LogTail::append_lines(std::ostream& out, bool prefix, const LineFilter& filter,
                           const std::string& piece) {
  size_t start = 0;
  for (size_t nl = piece.find('\n'); nl != std::string::npos; nl = piece.find('\n', start)) {
    partial_.append(piece, start, nl - start);
    emit(out, prefix, filter, partial_.data(), partial_.size());
    partial_.clear();
    start = nl + 1;
  }
  partial_.append(piece, start, std::string::npos);
  while (partial_.size() >= kMaxLineBytes) {  // a "line" without end: print it in pieces
    emit(out, prefix, filter, partial_.data(), kMaxLineBytes);
    partial_.erase(0, kMaxLineBytes);
  }
}

std::vector<std::string> read_last_lines(const std::filesystem::path& path, size_t max_lines,
                                         size_t max_bytes, size_t& first_line_number) {
  constexpr size_t kLineCap = 4096;
  first_line_number = 0;
  StatusOr<RegularFile> file = open_regular_file(path);
  if (!file.ok()) return {};
  uint64_t size = file->size();
  if (size == 0) return {};
  uint64_t start = size > max_bytes ? size - max_bytes : 0;
  StatusOr<std::string> read = file->read_at(start, static_cast<size_t>(size - start));
  if (!read.ok()) return {};
  const std::string& window = *read;
  std::vector<std::string> lines;
  size_t pos = 0;
  if (start > 0) {  // the window starts inside a line: drop that piece
    size_t nl = window.find('\n');
    pos = nl == std::string::npos ? window.size() : nl + 1;
  }
  while (pos < window.size()) {
    size_t nl = window.find('\n', pos);
    size_t end = nl == std::string::npos ? window.size() : nl;
    lines.push_back(window.substr(pos, std::min(end - pos, kLineCap)));
    pos = end + 1;
  }
  size_t drop = lines.size() > max_lines ? lines.size() - max_lines : 0;
  lines.erase(lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(drop));
  if (start == 0) first_line_number = drop + 1;
  return lines;
}

}  // namespace bridge
