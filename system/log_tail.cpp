#include "system/log_tail.h"

#include <algorithm>
#include <fstream>

namespace bridge {

namespace {
constexpr std::streamoff kReadPiece = 1 << 20;
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
  if (prefix) out << '[' << label_ << "] ";
  out.write(data, static_cast<std::streamsize>(size));
  out << '\n';
}

void LogTail::start_at_last_lines(size_t n) {
  std::ifstream in(path_, std::ios::binary);
  if (!in) return;
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  partial_.clear();
  offset_ = size;
  if (n == 0 || size <= 0) return;
  // Backwards in pieces: the (n)th newline from the end, not counting one that ends the file,
  // is where the last n lines start. Memory stays at one piece whatever the file's size.
  constexpr std::streamoff kPiece = std::streamoff{64} * 1024;
  size_t newlines = 0;
  std::string piece;
  for (std::streamoff end = size; end > 0;) {
    std::streamoff begin = std::max<std::streamoff>(0, end - kPiece);
    piece.resize(static_cast<size_t>(end - begin));
    in.seekg(begin);
    in.read(piece.data(), static_cast<std::streamsize>(piece.size()));
    for (size_t i = piece.size(); i > 0; --i) {
      std::streamoff at = begin + static_cast<std::streamoff>(i - 1);
      if (piece[i - 1] != '\n' || at == size - 1) continue;
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
  }
  if (final && !partial_.empty()) {
    emit(out, prefix, filter, partial_.data(), partial_.size());
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
