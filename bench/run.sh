#!/usr/bin/env bash
# Side-by-side ratios for bridge-launch, measured in one run on this machine (docs/performance.md).
# Each command runs REPEAT times, interleaved with its floor; the table reports medians and
# min-max. Usage: bench/run.sh [BUILD_DIR]   (REPEAT=N to change the repeat count)
set -uo pipefail
export LC_ALL=C  # EPOCHREALTIME and awk must agree on the decimal point
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
BL=$PWD/$BUILD_DIR/bridge-launch
REPEAT=${REPEAT:-15}
MOE=examples/recipes/qwen3-30b-a3b-ep-overlap.yaml
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export BRIDGE_LAUNCH_STATE_DIR=$TMP/state

# time_ms CMD... -> prints one wall time in milliseconds (output discarded). The clock is
# bash's own EPOCHREALTIME: calling `date` would add a process start to every sample.
time_ms() {
  local s e rc
  s=$EPOCHREALTIME
  "$@" >/dev/null 2>&1
  rc=$?
  e=$EPOCHREALTIME
  # A failing command is fast and meaningless: stop rather than report its time.
  if [ "$rc" -ne 0 ]; then
    echo "bench/run.sh: '$*' exited with $rc; not timing a failure" >&2
    exit 1
  fi
  awk -v s="$s" -v e="$e" 'BEGIN {printf "%.3f\n", (e - s) * 1000}'
}

# stats FILE -> "median min max" of the numbers in FILE
stats() { sort -g "$1" | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.3f %.3f %.3f", m, a[1], a[NR]}'; }

row() {  # row NAME MEDIAN MIN MAX NOTE
  printf "| %-46s | %10s | %17s | %s |\n" "$1" "$2" "$3 – $4" "$5"
}

# compare NAME_A FILE_A NAME_B FILE_B TARGET_NOTE: prints both rows and the ratio of medians
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

measure_pair() {  # measure_pair FILE CMD...   appends one time to FILE; exits on failure
  local file=$1 t
  shift
  t=$(time_ms "$@") || exit 1
  echo "$t" >>"$file"
}

echo "bridge-launch benchmark, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, REPEAT=$REPEAT"
echo
echo "| measurement | median ms | min – max ms | note |"
echo "|---|---|---|---|"

# 1. dry-run vs the process floor and the Python floor. The Python runs get a loop of their
# own: each one evicts the caches, and only the command right after it would pay for that.
# `--version` is bridge-launch's own start-up (process start, relocation, the parser), in a
# loop of its own with /bin/true: a regression there costs every command.
: >"$TMP/dry" ; : >"$TMP/true" ; : >"$TMP/py" ; : >"$TMP/version" ; : >"$TMP/true2"
for _ in $(seq "$REPEAT"); do
  measure_pair "$TMP/dry" "$BL" --dry-run --executor slurm "$MOE"
  measure_pair "$TMP/true" /bin/true
done
for _ in $(seq "$REPEAT"); do
  measure_pair "$TMP/version" "$BL" --version
  measure_pair "$TMP/true2" /bin/true
done
for _ in $(seq "$REPEAT"); do
  measure_pair "$TMP/py" python3 -c "import yaml; yaml.safe_load(open('$MOE'))"
done
read -r d dmin dmax < <(stats "$TMP/dry"); read -r t tmin tmax < <(stats "$TMP/true")
read -r p pmin pmax < <(stats "$TMP/py")
read -r v vmin vmax < <(stats "$TMP/version"); read -r t2 _ _ < <(stats "$TMP/true2")
row "dry-run --executor slurm (MoE example)" "$d" "$dmin" "$dmax" "$(ratio "$d" "$t")x /bin/true (target <= 1.6x, stretch 1.5x)"
row "/bin/true (process floor)" "$t" "$tmin" "$tmax" ""
row "bridge-launch --version (its start-up)" "$v" "$vmin" "$vmax" "$(ratio "$v" "$t2")x /bin/true (its own loop: $t2 ms)"
row "python3 yaml.safe_load (Python floor)" "$p" "$pmin" "$pmax" "$(ratio "$p" "$d")x slower than the dry-run (target >= 40x)"

# 2. Submission overhead on the Slurm test cluster, with jobs that run as a user's do: both
# submit the same script, and the jobs start and end while the loop goes on (the controller
# schedules, starts and ends them between and during the submissions). The MoE example's job
# fails at once on the test cluster's nodes (no Megatron-Bridge there): a short job, which
# keeps the controller busy. PAUSE seconds between pairs let the jobs run within the loop.
if sinfo -h >/dev/null 2>&1; then
  # One node a job (EP 8 on 8 GPUs), so that the test cluster's two nodes run two at a time.
  SUB=(--executor slurm -ng 8 -gn 8 "$MOE" model.expert_model_parallel_size=8
       executor.slurm.partition=debug "executor.slurm.job_dir=$TMP/jobs" executor.slurm.time=00:02:00)
  "$BL" --dry-run "${SUB[@]}" >"$TMP/job.sbatch" 2>/dev/null || { echo "dry-run failed" >&2; exit 1; }
  # The raw script's job dir (the dry-run's) must exist: Slurm cannot start a job whose
  # output file it cannot open.
  mkdir -p "$(sed -n "s/^BRIDGE_JOB_DIR='\(.*\)'$/\1/p" "$TMP/job.sbatch")"
  : >"$TMP/sub" ; : >"$TMP/sbatch"
  loop_start=$(date +%Y-%m-%dT%H:%M:%S)
  for _ in $(seq "$REPEAT"); do
    measure_pair "$TMP/sub" "$BL" -q "${SUB[@]}"
    sleep "${PAUSE:-0.3}"
    measure_pair "$TMP/sbatch" sbatch --parsable "$TMP/job.sbatch"
    sleep "${PAUSE:-0.3}"
  done
  # Jobs of this loop that started before it ended (the controller keeps ended ones for
  # MinJobAge, 300 s by default; an ISO start time compares as text).
  ran=$(squeue -h -t all -u "$(id -un)" -o '%S %T' 2>/dev/null |
    awk -v since="$loop_start" '$2 != "PENDING" && $1 >= since {n++} END {print n + 0}')
  squeue -h -o %i -u "$(id -un)" | xargs -r scancel >/dev/null 2>&1
  read -r s smin smax < <(stats "$TMP/sub"); read -r r rmin rmax < <(stats "$TMP/sbatch")
  row "bridge-launch --executor slurm (submit)" "$s" "$smin" "$smax" "$(ratio "$s" "$r")x raw sbatch (target <= 1.3x); $ran jobs started during the loop"
  row "sbatch --parsable (same script)" "$r" "$rmin" "$rmax" ""
else
  row "Slurm submission" "-" "-" "-" "skipped: no Slurm cluster (scripts/slurm-test-cluster.sh up)"
fi

# 2b. `--wait` on a 60-second job: controller query RPCs (sdiag, reset before) and how late
# the end is noticed (the job's EndTime from scontrol vs the moment --wait returned).
if sinfo -h >/dev/null 2>&1 && command -v sdiag >/dev/null 2>&1; then
  cat >"$TMP/sleep60.yaml" <<YAML
name: wait60
cluster: {num_gpus: 8, gpus_per_node: 8}
runtime: {command: [sleep, "60"], adapter: none}
executor: {slurm: {partition: debug, job_dir: $TMP/jobs}}
YAML
  sdiag -r >/dev/null
  "$BL" -q --executor slurm --wait "$TMP/sleep60.yaml" >"$TMP/wait.out" 2>"$TMP/wait.err" || true
  returned=$(date +%s)
  queries=$(sdiag | sed -n '/by message type/,/by user/p' |
    awk '/REQUEST_/ && /INFO/ && !/STATS_INFO/ {sub("count:", "", $4); n += $4} END {print n + 0}')
  sid=$(sed -n 's/.*slurm id \([0-9]*\).*/\1/p' "$TMP/wait.err" | head -n1)
  end=$(scontrol show job "$sid" 2>/dev/null | sed -n 's/.*EndTime=\([^ ]*\).*/\1/p')
  late="n/a"
  [ -n "$end" ] && late=$((returned - $(date -d "$end" +%s)))
  row "--wait on a 60 s Slurm job" "-" "-" "-" "$queries controller query RPCs (target <= 30); end noticed ${late} s late (target <= 6)"
else
  row "--wait on a 60 s Slurm job" "-" "-" "-" "skipped: no Slurm cluster or no sdiag"
fi

# 3. 64-rank local launch of a trivial command vs a shell loop spawning 64.
cat >"$TMP/r64.yaml" <<YAML
name: local-64
cluster: {num_gpus: 64, gpus_per_node: 64}
runtime: {command: [/bin/true], pass_overrides: false}
executor: {local: {job_dir: $TMP/jobs}}
YAML
: >"$TMP/l64" ; : >"$TMP/sh64"
for _ in $(seq 5); do
  measure_pair "$TMP/l64" "$BL" -q "$TMP/r64.yaml"
  measure_pair "$TMP/sh64" bash -c 'for i in $(seq 64); do /bin/true & done; wait'
done
read -r l lmin lmax < <(stats "$TMP/l64"); read -r h hmin hmax < <(stats "$TMP/sh64")
row "local launch, 64 ranks of /bin/true" "$l" "$lmin" "$lmax" "$(ratio "$l" "$h")x the shell loop (target <= 1.5x)"
row "bash loop spawning 64 /bin/true" "$h" "$hmin" "$hmax" ""

# 4. Scaling: plan + render for ng = 8 ... 32768 (gn 8); time and peak RSS.
for ex in slurm kubernetes; do
  prev=""
  for ng in 8 64 512 4096 32768; do
    # The global batch grows with the GPUs: it must be a multiple of micro_batch_size * dp (T7).
    SCALE=(model.expert_model_parallel_size=8 model.num_moe_experts=128
           runtime.container_image=nvcr.io/nvidia/nemo:25.11 "train.global_batch_size=$ng")
    : >"$TMP/scale"
    for _ in $(seq 5); do
      measure_pair "$TMP/scale" "$BL" --dry-run --executor "$ex" -ng "$ng" -gn 8 "$MOE" "${SCALE[@]}"
    done
    rss=$(/usr/bin/time -f %M "$BL" --dry-run --executor "$ex" -ng "$ng" -gn 8 "$MOE" "${SCALE[@]}" \
      2>&1 >/dev/null | tail -n1)
    read -r m mmin mmax < <(stats "$TMP/scale")
    growth=""
    [ -n "$prev" ] && growth="; x$(ratio "$m" "$prev") per 8x"
    row "dry-run $ex ng=$ng" "$m" "$mmin" "$mmax" "peak RSS $((rss / 1024)) MiB$growth"
    prev=$m
  done
done

# 5. status over 1000 registry entries of one executor (one scheduler query per poll).
mkdir -p "$BRIDGE_LAUNCH_STATE_DIR/jobs"
python3 - "$BRIDGE_LAUNCH_STATE_DIR/jobs" <<'PY'
import json, sys
for i in range(1000):
    rec = {"format": "bridge-launch-job/1", "id": f"bench-{i:04d}", "name": "bench",
           "executor": "slurm", "scheduler_id": str(900000 + i), "job_dir": "/nonexistent",
           "submitted_at": f"2026-01-01T00:00:{i % 60:02d}.000Z", "state": "RUNNING"}
    json.dump(rec, open(f"{sys.argv[1]}/bench-{i:04d}.json", "w"))
PY
: >"$TMP/status"
for _ in $(seq 3); do measure_pair "$TMP/status" "$BL" status; done
read -r st stmin stmax < <(stats "$TMP/status")
row "status over 1000 slurm entries" "$st" "$stmin" "$stmax" "wall time, with squeue + sacct + scontrol"
# The tool's own share: CPU time of bridge-launch alone, its scheduler commands excluded.
own=$(perf stat --no-inherit -x, -e task-clock -r 5 "$BL" status 2>&1 >/dev/null |
  awk -F, '/task-clock/ {printf "%.3f", $1}')
note="perf not available"
[ -n "$own" ] && note="CPU ms, perf stat --no-inherit, mean of 5 (target < 100 ms)"
row "status: bridge-launch's own CPU time" "${own:--}" "-" "-" "$note"

# 5b. The .deb (stripped binaries, CPACK_STRIP_FILES): built here when the build dir has none.
deb=$(ls -t "$BUILD_DIR"/bridge-launch_*.deb 2>/dev/null | head -n1)
if [ -z "$deb" ] && command -v cpack >/dev/null 2>&1; then
  (cd "$BUILD_DIR" && cpack -G DEB >/dev/null 2>&1)
  deb=$(ls -t "$BUILD_DIR"/bridge-launch_*.deb 2>/dev/null | head -n1)
fi
if [ -n "$deb" ]; then
  row ".deb package size" "-" "-" "-" "$(($(stat -c %s "$deb") / 1024)) KiB (target < 10 MiB; $(basename "$deb"))"
else
  row ".deb package size" "-" "-" "-" "skipped: no package and no cpack"
fi

# 6. Probe overlap efficiency at 4 local ranks on the emulated link.
eff=$("$BL" examples/recipes/demo.yaml executor.local.job_dir="$TMP/jobs" 2>/dev/null |
  sed -n 's/.*overlap efficiency: \([0-9.-]*\).*/\1/p' | tail -n1)
row "bridge-probe overlap efficiency, 4 ranks" "-" "-" "-" "efficiency ${eff:-n/a} (target >= 0.8)"

# 7. The runtime check (docs/runtime-check.md): validate with --runtime-check against the
# conformance suite's cached Megatron-Bridge, when this machine has it (it is never installed
# here: scripts/conformance-env.sh does that for `make test`). Target: a clean recipe in
# under 30 s; most of it is importing torch and Megatron-Bridge.
venv=$(ls -d "${XDG_CACHE_HOME:-$HOME/.cache}"/bridge-launch/conformance-*/venv 2>/dev/null | head -n1)
if [ -n "$venv" ] && [ -f "$(dirname "$venv")/ready" ]; then
  hf=$TMP/hf
  python3 -c 'import sys; sys.path.insert(0, "tests/conformance")
from harness import write_offline_hub; write_offline_hub(sys.argv[1])' "$hf"
  : >"$TMP/check"
  for _ in $(seq 3); do
    measure_pair "$TMP/check" env HF_HOME="$hf" HF_HUB_OFFLINE=1 \
      PYTHONPATH="$PWD/tests/conformance/stubs" "$BL" validate "$MOE" --runtime-check "$venv/bin/python"
  done
  read -r rc rcmin rcmax < <(stats "$TMP/check")
  row "validate --runtime-check (megatron-bridge)" "$rc" "$rcmin" "$rcmax" "wall time, Qwen3 MoE example (target < 30000 ms)"
else
  row "validate --runtime-check (megatron-bridge)" "-" "-" "-" "skipped: no conformance venv on this machine"
fi
