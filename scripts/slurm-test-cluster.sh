#!/usr/bin/env bash
# slurm-test-cluster.sh — a real local Slurm cluster for tests and development.
#
# One slurmctld plus two emulated nodes (node1, node2), each declaring 8 fake GPUs,
# all on this machine, run as root without systemd. See docs/slurm-test-cluster.md.
#
# Usage: scripts/slurm-test-cluster.sh up|down|status|stop-controller|start-controller
#
# Environment (all optional):
#   SLURM_TEST_STATE_DIR   state dir (default /var/lib/bridge-launch-slurm)
#   SLURM_TEST_CONF_DIR    config dir (default /etc/slurm; the client tools read it)
#   SLURM_TEST_LOG_DIR     log dir (default /var/log/slurm)
#   SLURM_TEST_UP_TIMEOUT  seconds `up` waits for usable nodes (default 60)
set -euo pipefail

readonly PROG="slurm-test-cluster"
readonly STATE_DIR="${SLURM_TEST_STATE_DIR:-/var/lib/bridge-launch-slurm}"
readonly CONF_DIR="${SLURM_TEST_CONF_DIR:-/etc/slurm}"
readonly LOG_DIR="${SLURM_TEST_LOG_DIR:-/var/log/slurm}"
readonly UP_TIMEOUT="${SLURM_TEST_UP_TIMEOUT:-60}"
readonly STOP_TIMEOUT=15

readonly SLURM_CONF="${CONF_DIR}/slurm.conf"
readonly GRES_CONF="${CONF_DIR}/gres.conf"
readonly CTLD_STATE="${STATE_DIR}/ctld"
readonly SPOOL_DIR="${STATE_DIR}/spool"
readonly RUN_DIR="${STATE_DIR}/run"
readonly DEV_DIR="${STATE_DIR}/dev"
readonly HASH_FILE="${STATE_DIR}/config.sha256"
readonly CTLD_PID="${RUN_DIR}/slurmctld.pid"
readonly CTLD_LOG="${LOG_DIR}/slurmctld.log"
readonly NODES=(node1 node2)
readonly GPUS_PER_NODE=8

export SLURM_CONF

# log, die, pid_running, stop_pids, take_state_lock: shared with the other test cluster.
# shellcheck source=scripts/lib/cluster-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cluster-common.sh"

usage() {
  cat >&2 <<EOF
usage: $0 up|down|status|stop-controller|start-controller
  up                bring the cluster up (idempotent; installs packages if missing)
  down              stop slurmd's and slurmctld (munged is left running)
  status            print sinfo; exit 0 if node1 and node2 are usable, 1 otherwise
  stop-controller   stop only slurmctld (simulate a controller outage)
  start-controller  start slurmctld again and wait until it answers
EOF
}

require_root() {
  [[ ${EUID} -eq 0 ]] || die "must run as root (starts daemons, writes ${CONF_DIR})"
}

# ---------------------------------------------------------------------------
# process helpers

# pid_alive PIDFILE NAME: prints the pid if PIDFILE names a live process called NAME.
pid_alive() {
  local pidfile=$1 name=$2 pid comm
  [[ -r ${pidfile} ]] || return 1
  pid=$(tr -dc '0-9' <"${pidfile}")
  [[ -n ${pid} ]] || return 1
  comm=$(cat "/proc/${pid}/comm" 2>/dev/null) || return 1
  [[ ${comm} == "${name}" ]] || return 1
  pid_running "${pid}" || return 1
  printf '%s\n' "${pid}"
}

# live_pids PGREP_ARGS...: like pgrep, minus zombies (a reaped-late dead daemon still
# matches pgrep here, PID 1 of a container may not reap).
live_pids() {
  local pid
  for pid in $(pgrep "$@" || true); do
    if pid_running "${pid}"; then printf '%s\n' "${pid}"; fi
  done
}

# Pids of daemons this script started (matched on their exact command line), in case
# a pid file is missing or stale.
find_ctld_pids() {
  live_pids -x -f "slurmctld -f ${SLURM_CONF}( .*)?"
}
find_slurmd_pids() {
  local node=$1
  live_pids -x -f "slurmd -f ${SLURM_CONF} -N ${node}( .*)?"
}

ctld_pids() {
  { pid_alive "${CTLD_PID}" slurmctld || true; find_ctld_pids; } | sort -u
}
slurmd_pids() {
  local node=$1
  { pid_alive "${RUN_DIR}/slurmd-${node}.pid" slurmd || true; find_slurmd_pids "${node}"; } | sort -u
}

stop_ctld() {
  local pids
  mapfile -t pids < <(ctld_pids)
  stop_pids slurmctld "${pids[@]}"
  rm -f "${CTLD_PID}"
}

# stop_all: slurmd's and slurmctld at once, so the bounded waits overlap.
stop_all() {
  local node pids=() p
  for node in "${NODES[@]}"; do
    while read -r p; do
      if [[ -n ${p} ]]; then pids+=("${p}"); fi
    done < <(slurmd_pids "${node}")
  done
  while read -r p; do
    if [[ -n ${p} ]]; then pids+=("${p}"); fi
  done < <(ctld_pids)
  stop_pids "slurmd's and slurmctld" "${pids[@]}"
  rm -f "${CTLD_PID}" "${RUN_DIR}"/slurmd-*.pid
}

# log_tails [FILE...]: the last lines of each (default: the slurm daemon logs).
log_tails() {
  local f files=("$@")
  if [[ ${#files[@]} -eq 0 ]]; then
    files=("${CTLD_LOG}" "${LOG_DIR}/slurmctld.stdout")
    for f in "${NODES[@]}"; do files+=("${LOG_DIR}/slurmd-${f}.log"); done
    files+=("${LOG_DIR}/slurmd.stdout")
  fi
  for f in "${files[@]}"; do
    [[ -s ${f} ]] || continue
    printf '%s: ---- tail of %s (PMIx noise omitted) ----\n' "${PROG}" "${f}" >&2
    grep -vE 'pmix|MPI: Cannot create context' "${f}" | tail -n 20 >&2 || true
  done
}

fail_with_logs() {
  log "error: $*"
  log_tails
  exit 1
}

# ---------------------------------------------------------------------------
# installation and munge

ensure_packages() {
  local missing=() cmd pkg
  for cmd in slurmctld:slurm-wlm slurmd:slurm-wlm sinfo:slurm-wlm munged:munge; do
    pkg=${cmd#*:}
    if ! command -v "${cmd%%:*}" >/dev/null 2>&1; then
      [[ " ${missing[*]} " == *" ${pkg} "* ]] || missing+=("${pkg}")
    fi
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  log "installing ${missing[*]} with apt-get (once)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 || die "apt-get update failed"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
    die "apt-get install ${missing[*]} failed"
  for cmd in slurmctld slurmd sinfo munged; do
    command -v "${cmd}" >/dev/null 2>&1 || die "${cmd} still missing after installing ${missing[*]}"
  done
}

munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

ensure_munge() {
  if munge_ok; then return 0; fi
  if [[ ! -s /etc/munge/munge.key ]]; then
    log "creating /etc/munge/munge.key"
    mkdir -p /etc/munge
    if command -v mungekey >/dev/null 2>&1; then
      mungekey --create --keyfile=/etc/munge/munge.key >&2
    else
      dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    fi
  fi
  mkdir -p /etc/munge /var/log/munge /run/munge /var/lib/munge
  chown -R munge:munge /etc/munge /var/log/munge /run/munge /var/lib/munge
  chmod 0700 /etc/munge /var/log/munge /var/lib/munge
  chmod 0755 /run/munge
  chmod 0400 /etc/munge/munge.key
  if [[ -z "$(live_pids -x munged)" ]]; then
    log "starting munged"
    # munged drops to the munge user itself when started as root with --force.
    setsid munged --force </dev/null >>"${LOG_DIR}/munged.stdout" 2>&1 9>&- ||
      { log_tails /var/log/munge/munged.log "${LOG_DIR}/munged.stdout"; die "munged failed to start"; }
  fi
  local i
  for ((i = 0; i < 50; i++)); do
    munge_ok && return 0
    sleep 0.2
  done
  log_tails /var/log/munge/munged.log "${LOG_DIR}/munged.stdout"
  die "munge does not work (munge -n | unmunge fails)"
}

# ---------------------------------------------------------------------------
# configuration

render_slurm_conf() {
  local host=$1
  cat <<EOF
# Generated by scripts/slurm-test-cluster.sh — local test cluster, do not edit by hand.
ClusterName=bridgelaunch
SlurmctldHost=${host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
# Start batch jobs at once (default batch_sched_delay=3 leaves them PENDING ~1-3 s).
SchedulerParameters=batch_sched_delay=0
ReturnToService=2
SlurmctldPort=6817
StateSaveLocation=${CTLD_STATE}
SlurmctldPidFile=${CTLD_PID}
SlurmctldLogFile=${CTLD_LOG}
SlurmdPidFile=${RUN_DIR}/slurmd-%n.pid
SlurmdSpoolDir=${SPOOL_DIR}/slurmd-%n
SlurmdLogFile=${LOG_DIR}/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# Finished jobs stay visible to 'scontrol show job' (no accounting here) for ten minutes:
# long enough for any test that asks about a job it ran, short enough that hundreds of ended
# benchmark jobs do not pile up and slow every sbatch and squeue (docs/performance.md).
MinJobAge=600
# Fail fast: failing jobs end quickly; clients give up quickly when slurmctld is down
# (MessageTimeout bounds how long sbatch/squeue keep retrying to reach the controller).
MessageTimeout=5
TCPTimeout=2
KillWait=5
UnkillableStepTimeout=30
KillOnBadExit=1
InactiveLimit=0
Waittime=0
SlurmctldTimeout=30
SlurmdTimeout=60
NodeName=node[1-2] NodeHostname=${host} NodeAddr=127.0.0.1 Port=17001-17002 CPUs=8 Boards=1 SocketsPerBoard=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=4000 Gres=gpu:${GPUS_PER_NODE} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
}

render_gres_conf() {
  cat <<EOF
# Generated by scripts/slurm-test-cluster.sh — fake GPUs (character devices like /dev/null).
AutoDetect=off
NodeName=node[1-2] Name=gpu File=${DEV_DIR}/nvidia[0-$((GPUS_PER_NODE - 1))]
EOF
}

ensure_dirs() {
  mkdir -p "${STATE_DIR}" "${CTLD_STATE}" "${SPOOL_DIR}" "${RUN_DIR}" "${DEV_DIR}" \
    "${LOG_DIR}" "${CONF_DIR}"
  local node i dev
  for node in "${NODES[@]}"; do mkdir -p "${SPOOL_DIR}/slurmd-${node}"; done
  for ((i = 0; i < GPUS_PER_NODE; i++)); do
    dev="${DEV_DIR}/nvidia${i}"
    if [[ ! -c ${dev} ]]; then
      rm -f "${dev}"
      mknod -m 0666 "${dev}" c 1 3
    fi
  done
}

ensure_hosts() {
  local node absent=0
  for node in "${NODES[@]}"; do
    if ! grep -Eq "^[[:space:]]*127\.0\.0\.1([[:space:]].*)?[[:space:]]${node}([[:space:]]|\$)" /etc/hosts; then
      absent=1
    fi
  done
  if ((absent)); then
    log "adding '127.0.0.1 ${NODES[*]}' to /etc/hosts"
    printf '127.0.0.1 %s\n' "${NODES[*]}" >>/etc/hosts
  fi
}

# ensure_config: writes the config; if it differs from what the running/saved state was
# built from, stops the daemons and clears the saved state (node states saved from a bad
# config persist otherwise). Returns 0 always; sets CONFIG_CHANGED=1 on a change.
CONFIG_CHANGED=0
ensure_config() {
  local host slurm_conf gres_conf want have=""
  host=$(hostname -s)
  slurm_conf=$(render_slurm_conf "${host}")
  gres_conf=$(render_gres_conf)
  want=$(printf '%s\n---\n%s\n' "${slurm_conf}" "${gres_conf}" | sha256sum | cut -d' ' -f1)
  [[ -r ${HASH_FILE} ]] && have=$(cat "${HASH_FILE}")
  if [[ ${want} == "${have}" ]] &&
    [[ "$(cat "${SLURM_CONF}" 2>/dev/null)" == "${slurm_conf}" ]] &&
    [[ "$(cat "${GRES_CONF}" 2>/dev/null)" == "${gres_conf}" ]]; then
    return 0
  fi
  CONFIG_CHANGED=1
  log "configuration new or changed: stopping daemons and clearing saved state"
  stop_all
  rm -rf "${CTLD_STATE:?}"/* "${SPOOL_DIR:?}"/*
  ensure_dirs
  printf '%s\n' "${slurm_conf}" >"${SLURM_CONF}.tmp.$$"
  mv -f "${SLURM_CONF}.tmp.$$" "${SLURM_CONF}"
  printf '%s\n' "${gres_conf}" >"${GRES_CONF}.tmp.$$"
  mv -f "${GRES_CONF}.tmp.$$" "${GRES_CONF}"
  chmod 0644 "${SLURM_CONF}" "${GRES_CONF}"
  printf '%s\n' "${want}" >"${HASH_FILE}"
}

# ---------------------------------------------------------------------------
# daemons

ctld_responding() { scontrol ping 2>/dev/null | grep -q 'is UP'; }

start_ctld() {
  if [[ -n "$(ctld_pids)" ]]; then return 0; fi
  log "starting slurmctld"
  # setsid: not in the caller's process group, so a test harness killing its group on
  # timeout does not take the controller with it; 9>&-: the daemon must not inherit the lock.
  setsid slurmctld -f "${SLURM_CONF}" </dev/null >>"${LOG_DIR}/slurmctld.stdout" 2>&1 9>&- ||
    fail_with_logs "slurmctld failed to start"
}

# A daemon that is forking into the background can briefly be missed by pgrep (the
# intermediate process exits while /proc is scanned), so a daemon counts as gone only
# after it was missing on 3 consecutive polls.
wait_ctld() {
  local deadline=$((SECONDS + $1)) misses=0
  while ((SECONDS < deadline)); do
    ctld_responding && return 0
    if [[ -n "$(ctld_pids)" ]]; then misses=0; else misses=$((misses + 1)); fi
    ((misses < 3)) || fail_with_logs "slurmctld exited during startup"
    sleep 0.3
  done
  fail_with_logs "slurmctld not answering 'scontrol ping' after $1s"
}

start_slurmds() {
  local node
  for node in "${NODES[@]}"; do
    if [[ -n "$(slurmd_pids "${node}")" ]]; then continue; fi
    log "starting slurmd ${node}"
    setsid slurmd -f "${SLURM_CONF}" -N "${node}" </dev/null >>"${LOG_DIR}/slurmd.stdout" 2>&1 9>&- ||
      fail_with_logs "slurmd ${node} failed to start"
  done
}

# node_state NODE: the short sinfo state (idle, alloc, mix, drain, down*, ...).
node_state() {
  sinfo -h -N -n "$1" -o '%t' 2>/dev/null | head -n 1
}

node_usable() {
  case "$(node_state "$1")" in
    idle | alloc | mix | comp) return 0 ;;
    *) return 1 ;;
  esac
}

wait_nodes() {
  local deadline=$((SECONDS + $1)) node state all resumed last_resume=-100
  local -A node_misses=()
  while ((SECONDS < deadline)); do
    all=1
    resumed=0
    for node in "${NODES[@]}"; do
      node_usable "${node}" && continue
      all=0
      if [[ -n "$(slurmd_pids "${node}")" ]]; then
        node_misses[${node}]=0
      else
        node_misses[${node}]=$((${node_misses[${node}]:-0} + 1))
        ((node_misses[${node}] < 3)) || fail_with_logs "slurmd ${node} is not running"
      fi
      state=$(node_state "${node}")
      # A trailing '*' means "not responding": resuming does not help until slurmd
      # registers; drained/down nodes that respond are resumed (at most every 3 s).
      case "${state}" in
        *'*') ;;
        *drain* | *drng* | *down* | *fail*)
          if ((SECONDS - last_resume >= 3)); then
            log "node ${node} is ${state}: scontrol update nodename=${node} state=resume"
            scontrol update nodename="${node}" state=resume >&2 || true
            resumed=1
          fi
          ;;
      esac
    done
    ((all)) && return 0
    ((resumed)) && last_resume=${SECONDS}
    sleep 0.5
  done
  sinfo -N >&2 || true
  scontrol show node 2>/dev/null | grep -E 'NodeName|State|Reason' >&2 || true
  fail_with_logs "nodes not usable after $1s"
}

# scheduler_ran: true once slurmctld's main scheduler has run a cycle. It runs its first
# cycle only ~3-5 s after startup; a job submitted before then sits PENDING (Reason=None).
scheduler_ran() {
  local cycles
  cycles=$(sdiag 2>/dev/null | awk -F: '/Total cycles/ { gsub(/[^0-9]/, "", $2); print $2; exit }')
  [[ ${cycles:-0} -gt 0 ]]
}

wait_scheduler() {
  local deadline=$((SECONDS + $1))
  while ((SECONDS < deadline)); do
    scheduler_ran && return 0
    sleep 0.3
  done
  fail_with_logs "slurmctld's scheduler has not run a cycle after $1s"
}

# ---------------------------------------------------------------------------
# commands

all_up() {
  local node
  [[ -n "$(ctld_pids)" ]] || return 1
  for node in "${NODES[@]}"; do
    [[ -n "$(slurmd_pids "${node}")" ]] || return 1
  done
  ctld_responding || return 1
  for node in "${NODES[@]}"; do node_usable "${node}" || return 1; done
  scheduler_ran
}

cmd_up() {
  require_root
  local t0=${SECONDS}
  ensure_packages
  mkdir -p "${LOG_DIR}"
  ensure_munge
  ensure_dirs
  ensure_hosts
  ensure_config
  if ((CONFIG_CHANGED == 0)) && all_up; then
    log "already up"
    return 0
  fi
  start_ctld
  wait_ctld "${UP_TIMEOUT}"
  start_slurmds
  wait_nodes "${UP_TIMEOUT}"
  wait_scheduler "${UP_TIMEOUT}"
  log "up ($((SECONDS - t0))s): controller $(hostname -s), nodes ${NODES[*]} with ${GPUS_PER_NODE} GPUs each"
}

# cancel_jobs: scancel every queued/running job (bounded wait), so that `down` leaves no
# job steps behind. Skipped when the controller is not running.
cancel_jobs() {
  local jobs deadline
  [[ -n "$(ctld_pids)" ]] || return 0
  jobs=$(squeue -h -o '%A' 2>/dev/null | tr '\n' ' ') || return 0
  [[ -n ${jobs// /} ]] || return 0
  log "cancelling jobs: ${jobs}"
  # shellcheck disable=SC2086 # word splitting of the job id list is intended
  scancel ${jobs} 2>/dev/null || true
  deadline=$((SECONDS + STOP_TIMEOUT))
  while ((SECONDS < deadline)); do
    [[ -z "$(squeue -h -o '%A' 2>/dev/null)" ]] && return 0
    sleep 0.3
  done
  log "warning: jobs still listed after ${STOP_TIMEOUT}s: $(squeue -h -o '%A %T' | tr '\n' ' ')"
}

# Job step daemons orphaned by stopped slurmd's (only this cluster runs slurmd here).
stop_stray_stepds() {
  local pids
  mapfile -t pids < <(live_pids -x slurmstepd)
  [[ ${#pids[@]} -gt 0 ]] || return 0
  log "warning: slurmstepd still running after the slurmd's stopped"
  stop_pids slurmstepd "${pids[@]}"
}

cmd_down() {
  require_root
  cancel_jobs
  stop_all
  stop_stray_stepds
  log "down"
}

cmd_status() {
  local out node ok=1 state
  if ! command -v sinfo >/dev/null 2>&1 || [[ ! -r ${SLURM_CONF} ]]; then
    log "slurm is not installed or not configured (run: $0 up)"
    return 1
  fi
  if [[ -z "$(ctld_pids)" ]]; then
    # Checked first: with no controller, every client call spends ~MessageTimeout seconds.
    log "slurmctld is not running (run: $0 up)"
    return 1
  fi
  if ! out=$(sinfo -N -o '%N %P %t %c %G' 2>&1); then
    printf '%s\n' "${out}" >&2
    log "sinfo failed: controller not answering"
    return 1
  fi
  printf '%s\n' "${out}"
  for node in "${NODES[@]}"; do
    if [[ -z "$(slurmd_pids "${node}")" ]]; then
      ok=0
      log "slurmd ${node} is not running"
      continue
    fi
    state=$(awk -v n="${node}" '$1 == n { print $3; exit }' <<<"${out}")
    case "${state}" in
      idle | alloc | mix | comp) ;;
      *)
        ok=0
        log "node ${node} is ${state:-missing}"
        ;;
    esac
  done
  ((ok)) && return 0
  log "cluster is not usable (a node is not idle/allocated)"
  return 1
}

cmd_stop_controller() {
  require_root
  stop_ctld
  log "slurmctld stopped"
}

cmd_start_controller() {
  require_root
  [[ -r ${SLURM_CONF} ]] || die "no ${SLURM_CONF}; run '$0 up' first"
  start_ctld
  wait_ctld "${UP_TIMEOUT}"
  # slurmd's are still running; they re-register with the restarted controller.
  start_slurmds
  wait_nodes "${UP_TIMEOUT}"
  wait_scheduler "${UP_TIMEOUT}"
  log "slurmctld running"
}

# lock: serialize mutating commands (parallel CI jobs may all call `up`).
lock() {
  require_root
  take_state_lock "${STATE_DIR}" 120
}

main() {
  [[ $# -eq 1 ]] || { usage; exit 2; }
  case "$1" in
    up | down | stop-controller | start-controller) lock ;;
  esac
  case "$1" in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    stop-controller) cmd_stop_controller ;;
    start-controller) cmd_start_controller ;;
    -h | --help | help) usage ;;
    *) usage; exit 2 ;;
  esac
}

main "$@"
