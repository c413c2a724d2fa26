#include "system/cancel_token.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

namespace bridge {

CancelToken::CancelToken() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

CancelToken::~CancelToken() {
  if (fd_ >= 0) close(fd_);
}

void CancelToken::cancel() noexcept {
  cancelled_.store(true);
  if (fd_ < 0) return;
  uint64_t one = 1;
  // A full counter (2^64 - 2 cancels) is still readable: nothing to do when write fails.
  [[maybe_unused]] ssize_t n = write(fd_, &one, sizeof one);
}

void CancelToken::reset() noexcept {
  cancelled_.store(false);
  if (fd_ < 0) return;
  uint64_t count = 0;
  [[maybe_unused]] ssize_t n = read(fd_, &count, sizeof count);  // EAGAIN when not cancelled
}

}  // namespace bridge
