#include "executors/log_tail.h"

#include <algorithm>
#include <fstream>

namespace bridge {

namespace {
constexpr std::streamoff kReadPiece = 1 << 20;
}

void LogTail::emit(std::ostream& out, bool prefix, const char* data, size_t size) const {
  if (prefix) out << '[' << label_ << "] ";
  out.write(data, static_cast<std::streamsize>(size));
  out << '\n';
}

void LogTail::pump(std::ostream& out, bool prefix, bool final) {
  std::ifstream in(path_, std::ios::binary);
  if (in) {
    in.seekg(0, std::ios::end);
    std::streamoff size = in.tellg();
    if (size < offset_) {  // truncated or replaced: start over
      offset_ = 0;
      partial_.clear();
    }
    in.seekg(offset_);
    std::string piece;
    while (offset_ < size) {
      piece.resize(static_cast<size_t>(std::min(kReadPiece, size - offset_)));
      in.read(piece.data(), static_cast<std::streamsize>(piece.size()));
      piece.resize(static_cast<size_t>(in.gcount()));
      if (piece.empty()) break;
      offset_ += static_cast<std::streamoff>(piece.size());
      // Whole lines of partial_ + piece; the rest waits for its newline.
      size_t start = 0;
      for (size_t nl = piece.find('\n'); nl != std::string::npos; nl = piece.find('\n', start)) {
        partial_.append(piece, start, nl - start);
        emit(out, prefix, partial_.data(), partial_.size());
        partial_.clear();
        start = nl + 1;
      }
      partial_.append(piece, start, std::string::npos);
      while (partial_.size() >= kMaxLineBytes) {  // a "line" without end: print it in pieces
        emit(out, prefix, partial_.data(), kMaxLineBytes);
        partial_.erase(0, kMaxLineBytes);
      }
    }
  }
  if (final && !partial_.empty()) {
    emit(out, prefix, partial_.data(), partial_.size());
    partial_.clear();
  }
  out.flush();
}

std::vector<std::string> read_last_lines(const std::filesystem::path& path, size_t max_lines,
                                         size_t max_bytes, size_t& first_line_number) {
  constexpr size_t kLineCap = 4096;
  first_line_number = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size <= 0) return {};
  std::streamoff start = std::max<std::streamoff>(0, size - static_cast<std::streamoff>(max_bytes));
  std::string window(static_cast<size_t>(size - start), '\0');
  in.seekg(start);
  in.read(window.data(), static_cast<std::streamsize>(window.size()));
  window.resize(static_cast<size_t>(in.gcount()));
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
