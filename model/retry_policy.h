// The failure classes a Slurm job is resubmitted after (executor.slurm.retry_on), and which of
// `why`'s error signatures (jobs/failure_triage.h) each class stands for.
//
// Contract:
// - retry_classes() is constant data, in the order the docs list it. Each class names the
//   signature ids it covers; a unit test checks that every one is a signature of
//   error_signatures(), so the batch script's decision and `why` speak of the same failures.
// - "any" retries every failure, whatever its logs show (the behaviour of `retries` before
//   retry_on existed); it covers no signature of its own.
// - The default classes are the transient ones: NCCL timeouts, GPU Xid/ECC errors, node
//   failures. Out-of-memory is excluded by default: a retry would fail the same way.
#pragma once

#include <string>
#include <vector>

namespace bridge {

struct RetryClass {
  const char* id;                       // what executor.slurm.retry_on lists: "nccl-timeout"
  const char* description;              // for people and the docs
  std::vector<const char*> signatures;  // `why` signature ids this class covers
  bool by_default = false;              // retried when retry_on is not set
};

inline constexpr const char* kRetryAnyFailure = "any";

const std::vector<RetryClass>& retry_classes();

// The class ids retried when executor.slurm.retry_on is not set, in table order.
std::vector<std::string> default_retry_on();

// Every id retry_on accepts: the classes, then "any".
std::vector<std::string> retry_on_values();

}  // namespace bridge
