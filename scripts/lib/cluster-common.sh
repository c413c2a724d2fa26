# cluster-common.sh: the helpers both test clusters' scripts use (scripts/slurm-test-cluster.sh,
# scripts/k8s-test-cluster.sh), sourced by each after it sets PROG and STOP_TIMEOUT.
# Logging, process stopping and the state-dir lock behave the same in both: one copy here.

# log MESSAGE...: one line on stderr, prefixed with the script's name.
log() { printf '%s: %s\n' "${PROG}" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# pid_running PID: exists and is not a zombie.
pid_running() {
  local state
  state=$(awk '/^State:/ { print $2; exit }' "/proc/$1/status" 2>/dev/null) || return 1
  [[ -n ${state} && ${state} != Z ]]
}

# stop_pids WHAT PID...: SIGTERM, a wait bounded by STOP_TIMEOUT seconds, then SIGKILL.
stop_pids() {
  local what=$1 pid deadline alive
  shift
  [[ $# -gt 0 ]] || return 0
  log "stopping ${what} (pid $*)"
  kill -TERM "$@" 2>/dev/null || true
  deadline=$((SECONDS + STOP_TIMEOUT))
  while ((SECONDS < deadline)); do
    alive=0
    for pid in "$@"; do
      if pid_running "${pid}"; then alive=1; fi
    done
    ((alive)) || return 0
    sleep 0.2
  done
  log "${what} did not exit within ${STOP_TIMEOUT}s; sending SIGKILL"
  kill -KILL "$@" 2>/dev/null || true
  sleep 0.5
}

# take_state_lock DIR SECONDS: serialize the mutating commands on one cluster (parallel CI
# jobs may all call `up`) with a lock file in DIR, held on fd 9 until the script exits.
take_state_lock() {
  local dir=$1 seconds=$2
  mkdir -p "${dir}"
  exec 9>"${dir}/.lock"
  if ! flock -w "${seconds}" 9; then die "another $0 is still running (lock ${dir}/.lock)"; fi
}
