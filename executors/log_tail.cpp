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

}  // namespace bridge
