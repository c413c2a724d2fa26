#!/usr/bin/env bash
# Runs each libFuzzer target for a bounded time (`make fuzz` builds them first).
#   FUZZ_BUILD_DIR (default build-clang)  FUZZ_SECONDS (default 30 per target)
#   arguments: the targets to run (default: all ten)
# Seeds come from tests/fuzz/corpus/<target>/ (read-only); inputs the fuzzer finds go to
# $FUZZ_BUILD_DIR/corpus/<target>/, crash/leak/timeout reproducers to
# $FUZZ_BUILD_DIR/artifacts/. Fails when any target reports a crash, a leak, a sanitizer
# error, an exception, a timeout (-timeout) or an out-of-memory (-rss_limit_mb).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${FUZZ_BUILD_DIR:-build-clang}
SECONDS_PER_TARGET=${FUZZ_SECONDS:-30}
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(fuzz_recipe_loader fuzz_override fuzz_shell_quote fuzz_plan_render
  fuzz_slurm_template fuzz_scheduler_output fuzz_registry_entry fuzz_plan_verdict
  fuzz_slurm_attempts fuzz_include_glob)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=()
for t in "${targets[@]}"; do
  bin="$BUILD/tests/fuzz/$t"
  seeds="tests/fuzz/corpus/${t#fuzz_}"
  work="$BUILD/corpus/${t#fuzz_}"
  art="$BUILD/artifacts/$t/"
  mkdir -p "$work" "$art"
  dict=()
  [ -f "tests/fuzz/${t#fuzz_}.dict" ] && dict=(-dict="tests/fuzz/${t#fuzz_}.dict")
  echo "== $t: ${SECONDS_PER_TARGET} s (seeds: $seeds) =="
  if [ ! -x "$bin" ]; then
    echo "fuzz: $bin is missing (make fuzz builds it)"
    failed+=("$t")
    continue
  fi
  # -timeout=20: no input may take that long (a recipe loads in milliseconds), and a hang
  # must end as a timeout with a reproducer before it grows into an out-of-memory report:
  # libFuzzer prints a memory profile of the multi-GiB heap first, which takes minutes. The
  # outer timeout is the safety net for that case.
  timeout --signal=KILL $((SECONDS_PER_TARGET + 120)) \
    "$bin" -max_total_time="$SECONDS_PER_TARGET" -timeout=20 -rss_limit_mb=2048 -max_len=8192 \
    -print_final_stats=1 -artifact_prefix="$art" "${dict[@]}" "$work" "$seeds" \
    >"$BUILD/$t.log" 2>&1
  rc=$?
  [ $rc -eq 137 ] && echo "fuzz: $t did not finish in time (killed; see the log for an OOM report)"
  grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss_mb)' "$BUILD/$t.log" | tail -n 3
  if [ $rc -ne 0 ]; then
    echo "fuzz: $t FAILED (exit $rc); reproducer(s) in $art, log $BUILD/$t.log:"
    grep -E -A40 '^==[0-9]+==ERROR|runtime error|fuzz invariant|deadly signal|ERROR: libFuzzer|terminate called' \
      "$BUILD/$t.log" | head -n 60
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: ${#failed[@]} target(s) failed: ${failed[*]}"
  exit 1
fi
echo "fuzz: ${#targets[@]} target(s) ran ${SECONDS_PER_TARGET} s each without findings"
