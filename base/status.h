// Status and StatusOr<T>: a failure of the outside world (a file, a directory, a program to
// start, a scheduler's output) as a value, for the code below the commands.
//
// Contract: a Status is ok, or failed with one sentence that says what could not be done and
// why ("cannot open /x: Permission denied"), written so that a command can show it as is.
// StatusOr<T> holds either a T or a failed Status, never both, never neither. Nothing here
// throws; reading value() of a failed StatusOr is a programming error (asserted).
//
// Problems in what the user wrote (a recipe, an override, a flag) are Diagnostics
// (base/diagnostics.h), not Status: they carry the file position and the fix. A command
// turns a Status into a diagnostic or an error line where it knows what the failure means to
// the user (the registry: "cannot record job X: <why>").
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace bridge {

class Status {
 public:
  Status() = default;  // ok
  static Status failed(std::string why) {
    Status s;
    s.why_ = why.empty() ? std::string("failed (no reason given)") : std::move(why);
    return s;
  }
  bool ok() const { return why_.empty(); }
  // The reason; "" when ok.
  const std::string& why() const { return why_; }

 private:
  std::string why_;
};

template <class T>
class StatusOr {
 public:
  // Implicit both ways, so that a function returns either its value or Status::failed(...).
  StatusOr(T value) : value_(std::move(value)) {}           // NOLINT(google-explicit-constructor)
  StatusOr(Status failure) : status_(std::move(failure)) {  // NOLINT(google-explicit-constructor)
    assert(!status_.ok() && "a StatusOr without a value needs a failed Status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  const std::string& why() const { return status_.why(); }

  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace bridge
