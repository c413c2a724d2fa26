#!/usr/bin/env bash
# k8s-test-cluster.sh — a real Kubernetes control plane for tests and development.
#
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the JobSet controller
# (with its CRD and admission webhooks), kwok (fake GPU nodes that "run" pods by writing
# their status), the Kueue controller (quota admission of JobSets, Jobs and TrainJobs labelled
# kueue.x-k8s.io/queue-name; LocalQueue default/gpu-queue) and the Kubeflow Trainer
# controller (TrainJobs, with its ClusterTrainingRuntime torch-distributed), all built from upstream Go
# modules at the versions pinned in tests/k8s-control-plane/*/go.mod, all listening on
# 127.0.0.1 only; and the pod runner (tests/k8s-control-plane/pod-runner.py, Python), a
# stand-in kubelet that really runs the pods labelled bridge-launch.test/run=host as
# processes on this machine. See docs/executors/k8s-test-cluster.md.
#
# Usage: scripts/k8s-test-cluster.sh up|down|status|build|env
#
# The binaries are built once (slow: Kubernetes is big) into
#   ${XDG_CACHE_HOME:-$HOME/.cache}/bridge-launch/k8s-<versions>-<hash of the go.sum files>/
# and reused by every later `up`, from any clone; Kueue, built from its own module, into
#   ${XDG_CACHE_HOME:-$HOME/.cache}/bridge-launch/kueue-<version>-<hash of its go.mod/go.sum>/
# (so that changing Kueue does not rebuild Kubernetes); Trainer likewise into trainer-<version>-<hash>/.
# The runtime state (certificates, etcd
# data, logs, pid files, kubeconfig) lives in the state dir, by default
#   ${TMPDIR:-/tmp}/bridge-launch-k8s-<uid>/
# `up` prints the kubeconfig path as its last line of stdout; `env` prints shell exports
# (KUBECONFIG, and PATH with the matching kubectl first).
#
# Environment (all optional):
#   K8S_TEST_STATE_DIR   state dir (default ${TMPDIR:-/tmp}/bridge-launch-k8s-<uid>)
#   K8S_TEST_CACHE_DIR   binary cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/bridge-launch)
#   K8S_TEST_PORT_BASE   ports used are BASE+43 (API server), +44 (JobSet webhook),
#                        +45 (Kueue webhook), +46 (Trainer webhook), +50 (kwok),
#                        +57 (controller manager), +59 (scheduler), +79..80 (etcd),
#                        +81 (JobSet health), +82 (Kueue health), +83 (Trainer health)
#                        (default 16400: API server on 127.0.0.1:16443; below the
#                        kernel's ephemeral port range, so no outgoing connection holds them)
#   K8S_TEST_NODES       number of fake GPU nodes (default 2)
#   K8S_TEST_GPUS        nvidia.com/gpu capacity per node (default 8)
#   K8S_TEST_UP_TIMEOUT  seconds each startup step may take (default 90)
#   K8S_TEST_BUILD_NICE  niceness of the one-time build (default 19)
#   K8S_TEST_KUEUE       1 (default): run Kueue; 0: a cluster without Kueue (for a machine
#                        where `unshare --mount` is not allowed, see start_kueue)
#   K8S_TEST_TRAINER     1 (default): run the Kubeflow Trainer controller; 0: without it
#   K8S_TEST_POD_RUNNER  1 (default): run the pod runner (needs python3 >= 3.8); 0: without
#                        it (pods labelled bridge-launch.test/run=host then stay Running)
#   K8S_TEST_POD_RUNNER_KEEP  1: the pod runner keeps a deleted pod's directory (log, work
#                        dir) under pod-runner/pods/ until `down` (default 0: removed)
set -euo pipefail

readonly PROG="k8s-test-cluster"
ROOT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly ROOT_DIR
readonly SRC_DIR="${ROOT_DIR}/tests/k8s-control-plane"
readonly MODULES=(kubernetes jobset kwok)
# Kueue is built from its own module into a cache dir of its own (ensure_kueue_built).
readonly KUEUE_MODULE=kueue
# Kubeflow Trainer likewise (ensure_trainer_built).
readonly TRAINER_MODULE=trainer

readonly STATE_DIR="${K8S_TEST_STATE_DIR:-${TMPDIR:-/tmp}/bridge-launch-k8s-$(id -u)}"
readonly CACHE_ROOT="${K8S_TEST_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/bridge-launch}"
readonly PORT_BASE="${K8S_TEST_PORT_BASE:-16400}"
readonly NODE_COUNT="${K8S_TEST_NODES:-2}"
readonly GPUS_PER_NODE="${K8S_TEST_GPUS:-8}"
readonly UP_TIMEOUT="${K8S_TEST_UP_TIMEOUT:-90}"
readonly BUILD_NICE="${K8S_TEST_BUILD_NICE:-19}"
readonly KUEUE_ENABLED="${K8S_TEST_KUEUE:-1}"
readonly TRAINER_ENABLED="${K8S_TEST_TRAINER:-1}"
readonly POD_RUNNER_ENABLED="${K8S_TEST_POD_RUNNER:-1}"
readonly STOP_TIMEOUT=15
# Bump to rebuild the cache after changing how the binaries are built.
readonly BUILD_REV=1
# Bump to rebuild the Kueue cache after changing how Kueue is built (BUILD_REV is not in
# its hash, KUEUE_BUILD_REV not in CACHE_DIR's).
readonly KUEUE_BUILD_REV=1
readonly TRAINER_BUILD_REV=1

readonly APISERVER_PORT=$((PORT_BASE + 43))
readonly JOBSET_WEBHOOK_PORT=$((PORT_BASE + 44))
readonly KUEUE_WEBHOOK_PORT=$((PORT_BASE + 45))
readonly TRAINER_WEBHOOK_PORT=$((PORT_BASE + 46))
readonly KWOK_PORT=$((PORT_BASE + 50))
readonly KCM_PORT=$((PORT_BASE + 57))
readonly SCHEDULER_PORT=$((PORT_BASE + 59))
readonly ETCD_PORT=$((PORT_BASE + 79))
readonly ETCD_PEER_PORT=$((PORT_BASE + 80))
readonly JOBSET_HEALTH_PORT=$((PORT_BASE + 81))
readonly KUEUE_HEALTH_PORT=$((PORT_BASE + 82))
readonly TRAINER_HEALTH_PORT=$((PORT_BASE + 83))

readonly PKI_DIR="${STATE_DIR}/pki"
readonly RUN_DIR="${STATE_DIR}/run"
readonly LOG_DIR="${STATE_DIR}/logs"
readonly CONF_DIR="${STATE_DIR}/config"
readonly ETCD_DATA="${STATE_DIR}/etcd"
readonly POD_LOG_DIR="${STATE_DIR}/pod-logs"
# The pod runner: per-pod dirs (pods/), its TLS files (tls/), process records (procs/).
readonly POD_RUNNER_DIR="${STATE_DIR}/pod-runner"
readonly POD_RUNNER="${SRC_DIR}/pod-runner.py"
readonly KUBECONFIG_FILE="${STATE_DIR}/kubeconfig"
readonly SERVICE_CIDR="10.96.0.0/16"
readonly POD_CIDR="10.244.0.0/16"
# Daemons, in start order (the binary of each has the same name); the first six come from
# CACHE_DIR, kueue from KUEUE_CACHE_DIR, trainer-controller-manager from TRAINER_CACHE_DIR;
# pod-runner is POD_RUNNER run by python3.
readonly CORE_DAEMONS=(etcd kube-apiserver kube-controller-manager kube-scheduler jobset kwok)
case ${KUEUE_ENABLED} in
  1) DAEMONS=("${CORE_DAEMONS[@]}" kueue) ;;
  0) DAEMONS=("${CORE_DAEMONS[@]}") ;;
  *) printf '%s: error: K8S_TEST_KUEUE must be 1 or 0, not %s\n' "${PROG}" "${KUEUE_ENABLED}" >&2; exit 2 ;;
esac
case ${TRAINER_ENABLED} in
  1) DAEMONS+=(trainer-controller-manager) ;;
  0) ;;
  *) printf '%s: error: K8S_TEST_TRAINER must be 1 or 0, not %s\n' "${PROG}" "${TRAINER_ENABLED}" >&2; exit 2 ;;
esac
case ${POD_RUNNER_ENABLED} in
  1) DAEMONS+=(pod-runner) ;;
  0) ;;
  *) printf '%s: error: K8S_TEST_POD_RUNNER must be 1 or 0, not %s\n' "${PROG}" "${POD_RUNNER_ENABLED}" >&2; exit 2 ;;
esac
readonly DAEMONS
# Kueue's quota objects (config/kueue-queues.yaml): JobSets and Jobs labelled
# kueue.x-k8s.io/queue-name: gpu-queue in namespace default are admitted by Kueue.
readonly KUEUE_FLAVOR=default-flavor
readonly KUEUE_CLUSTER_QUEUE=gpu-cluster-queue
readonly KUEUE_LOCAL_QUEUE=gpu-queue

# log, die, pid_running, stop_pids, take_state_lock: shared with the other test cluster.
# shellcheck source=scripts/lib/cluster-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cluster-common.sh"

usage() {
  cat >&2 <<EOF
usage: $0 up|down|status|build|env
  up      build the binaries if not cached, start the control plane (idempotent);
          the last line of stdout is the kubeconfig path
  down    stop every component and drop the cluster's data (idempotent)
  status  say what runs; exit 0 if the cluster is usable, 1 otherwise
  build   only build (or find) the cached binaries; prints their directories
          (Kubernetes, JobSet, kwok; then Kueue, Trainer)
  env     print 'export KUBECONFIG=...' and 'export PATH=<bin>:...' for eval
EOF
}

# ---------------------------------------------------------------------------
# versions and the binary cache

# mod_version MODULE_DIR MODULE_PATH: the version MODULE_DIR/go.mod requires.
mod_version() {
  awk -v m="$2" '
    $1 == "require" && $2 == m { print $3; exit }
    $1 == m && $2 ~ /^v/ { print $2; exit }' "${SRC_DIR}/$1/go.mod"
}

for m in "${MODULES[@]}"; do
  [[ -r ${SRC_DIR}/${m}/go.mod && -r ${SRC_DIR}/${m}/go.sum ]] ||
    die "missing ${SRC_DIR}/${m}/go.mod or go.sum (run this script from a bridge-launch checkout)"
done
K8S_VERSION=$(mod_version kubernetes k8s.io/kubernetes)
ETCD_VERSION=$(mod_version kubernetes go.etcd.io/etcd/server/v3)
JOBSET_VERSION=$(mod_version jobset sigs.k8s.io/jobset)
KWOK_VERSION=$(mod_version kwok sigs.k8s.io/kwok)
readonly K8S_VERSION ETCD_VERSION JOBSET_VERSION KWOK_VERSION
[[ -n ${K8S_VERSION} && -n ${ETCD_VERSION} && -n ${JOBSET_VERSION} && -n ${KWOK_VERSION} ]] ||
  die "cannot read the pinned versions from ${SRC_DIR}/*/go.mod"

build_hash() {
  local m
  {
    printf 'rev %s\n' "${BUILD_REV}"
    for m in "${MODULES[@]}"; do cat "${SRC_DIR}/${m}/go.mod" "${SRC_DIR}/${m}/go.sum"; done
  } | sha256sum | cut -c1-12
}

CACHE_DIR="${CACHE_ROOT}/k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}-jobset-${JOBSET_VERSION}-kwok-${KWOK_VERSION}-$(build_hash)"
readonly CACHE_DIR
readonly BIN_DIR="${CACHE_DIR}/bin"
readonly MANIFEST_DIR="${CACHE_DIR}/manifests"

[[ -r ${SRC_DIR}/${KUEUE_MODULE}/go.mod && -r ${SRC_DIR}/${KUEUE_MODULE}/go.sum ]] ||
  die "missing ${SRC_DIR}/${KUEUE_MODULE}/go.mod or go.sum (run this script from a bridge-launch checkout)"
KUEUE_VERSION=$(mod_version "${KUEUE_MODULE}" sigs.k8s.io/kueue)
readonly KUEUE_VERSION
[[ -n ${KUEUE_VERSION} ]] || die "cannot read the pinned Kueue version from ${SRC_DIR}/${KUEUE_MODULE}/go.mod"

# addon_build_hash MODULE REV: like build_hash, for an add-on's own cache dir (Kueue,
# Trainer). Kept apart from build_hash so that adding or changing an add-on leaves CACHE_DIR
# (15+ minutes of Kubernetes build) as it is.
addon_build_hash() {
  {
    printf '%s rev %s\n' "$1" "$2"
    cat "${SRC_DIR}/$1/go.mod" "${SRC_DIR}/$1/go.sum"
  } | sha256sum | cut -c1-12
}

KUEUE_CACHE_DIR="${CACHE_ROOT}/kueue-${KUEUE_VERSION}-$(addon_build_hash "${KUEUE_MODULE}" "${KUEUE_BUILD_REV}")"
readonly KUEUE_CACHE_DIR
readonly KUEUE_BIN_DIR="${KUEUE_CACHE_DIR}/bin"
readonly KUEUE_MANIFEST_DIR="${KUEUE_CACHE_DIR}/manifests"

[[ -r ${SRC_DIR}/${TRAINER_MODULE}/go.mod && -r ${SRC_DIR}/${TRAINER_MODULE}/go.sum ]] ||
  die "missing ${SRC_DIR}/${TRAINER_MODULE}/go.mod or go.sum (run this script from a bridge-launch checkout)"
TRAINER_VERSION=$(mod_version "${TRAINER_MODULE}" github.com/kubeflow/trainer/v2)
readonly TRAINER_VERSION
[[ -n ${TRAINER_VERSION} ]] || die "cannot read the pinned Trainer version from ${SRC_DIR}/${TRAINER_MODULE}/go.mod"
TRAINER_CACHE_DIR="${CACHE_ROOT}/trainer-${TRAINER_VERSION}-$(addon_build_hash "${TRAINER_MODULE}" "${TRAINER_BUILD_REV}")"
readonly TRAINER_CACHE_DIR
readonly TRAINER_BIN_DIR="${TRAINER_CACHE_DIR}/bin"
# CRDs (*.yaml applied with the others) and, apart, the torch-distributed runtime.
readonly TRAINER_MANIFEST_DIR="${TRAINER_CACHE_DIR}/manifests"
readonly TRAINER_RUNTIME_FILE="${TRAINER_CACHE_DIR}/torch-distributed.yaml"

# k8s_ldflags: what Kubernetes' own build stamps in, so that `kubectl version` and the
# API server's /version report the pinned release instead of v0.0.0-master.
k8s_ldflags() {
  local v=${K8S_VERSION} minor pkg flags="-s -w"
  minor=${v#v1.}
  minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X ${pkg}.gitVersion=${v} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor}"
    flags+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
  done
  printf '%s\n' "${flags}"
}

# go_build MODULE LDFLAGS: builds every `tool` of tests/k8s-control-plane/MODULE into
# the staging bin dir. One `go build` at a time, niced: the machine is shared.
go_build() {
  local module=$1 ldflags=$2 t0=${SECONDS}
  log "building ${module} tools (go build, nice ${BUILD_NICE}; the first build takes long)"
  if ! (cd "${SRC_DIR}/${module}" &&
    nice -n "${BUILD_NICE}" go build -mod=readonly -trimpath -ldflags "${ldflags}" \
      -o "${STAGE_DIR}/bin/" tool) >>"${STAGE_DIR}/build.log" 2>&1; then
    tail -n 40 "${STAGE_DIR}/build.log" >&2
    die "go build in ${SRC_DIR}/${module} failed (log: ${STAGE_DIR}/build.log)"
  fi
  log "built ${module} in $((SECONDS - t0))s"
}

# module_dir MODULE_DIR MODULE_PATH: where the module's source is in GOMODCACHE.
module_dir() {
  local dir
  dir=$(cd "${SRC_DIR}/$1" && go list -mod=readonly -m -f '{{.Dir}}' "$2") || return 1
  [[ -n ${dir} && -d ${dir} ]] || return 1
  printf '%s\n' "${dir}"
}

# need_go CACHE: puts Go on PATH, or fails saying that CACHE needs it.
need_go() {
  # The official Go install is not always on a non-login shell's PATH.
  if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
    PATH="/usr/local/go/bin:${PATH}"
  fi
  command -v go >/dev/null 2>&1 ||
    die "'go' not found: Go (>= 1.26) and the Go module proxy are needed once, to build $1"
}

# build_lock: serialize builds (parallel CI jobs may all call `up`); fd 8, not the state
# lock's 9. One lock for both cache dirs: one `go build` at a time on the machine.
build_lock() {
  mkdir -p "${CACHE_ROOT}"
  exec 8>"${CACHE_ROOT}/.build.lock"
  if ! flock -n 8; then
    log "another build holds ${CACHE_ROOT}/.build.lock; waiting (up to 2 h)"
    flock -w 7200 8 || die "timed out waiting for ${CACHE_ROOT}/.build.lock"
  fi
}

ensure_built() {
  [[ -f ${CACHE_DIR}/.complete ]] && return 0
  need_go "${CACHE_DIR}"
  build_lock
  if [[ -f ${CACHE_DIR}/.complete ]]; then
    exec 8>&-
    return 0
  fi
  local t0=${SECONDS} jobset_src kwok_src
  STAGE_DIR="${CACHE_DIR}.partial"
  rm -rf "${STAGE_DIR}" "${CACHE_DIR}"
  mkdir -p "${STAGE_DIR}/bin" "${STAGE_DIR}/manifests"
  log "building the control plane once into ${CACHE_DIR}"
  log "versions: kubernetes ${K8S_VERSION}, etcd ${ETCD_VERSION}, jobset ${JOBSET_VERSION}, kwok ${KWOK_VERSION}; $(go version)"
  go_build kubernetes "$(k8s_ldflags)"
  # The etcd server's main package is the module root go.etcd.io/etcd/server/v3.
  if [[ -x ${STAGE_DIR}/bin/server ]]; then mv -f "${STAGE_DIR}/bin/server" "${STAGE_DIR}/bin/etcd"; fi
  go_build jobset "-s -w -X sigs.k8s.io/jobset/pkg/version.GitVersion=${JOBSET_VERSION}"
  go_build kwok "-s -w"
  jobset_src=$(module_dir jobset sigs.k8s.io/jobset) || die "cannot locate sigs.k8s.io/jobset in GOMODCACHE"
  kwok_src=$(module_dir kwok sigs.k8s.io/kwok) || die "cannot locate sigs.k8s.io/kwok in GOMODCACHE"
  cp "${jobset_src}/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml" "${STAGE_DIR}/manifests/jobset-crd.yaml"
  cp "${kwok_src}/kustomize/crd/bases/kwok.x-k8s.io_logs.yaml" "${STAGE_DIR}/manifests/kwok-logs-crd.yaml"
  chmod u+w "${STAGE_DIR}/manifests/"*.yaml
  local b
  for b in "${CORE_DAEMONS[@]}" kubectl; do
    [[ -x ${STAGE_DIR}/bin/${b} ]] || die "build produced no ${b} (have: $(ls "${STAGE_DIR}/bin" | tr '\n' ' '))"
  done
  {
    printf 'kubernetes %s\netcd %s\njobset %s\nkwok %s\n' "${K8S_VERSION}" "${ETCD_VERSION}" "${JOBSET_VERSION}" "${KWOK_VERSION}"
    go version
    printf 'built %s in %ss\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$((SECONDS - t0))"
  } >"${STAGE_DIR}/versions.txt"
  touch "${STAGE_DIR}/.complete"
  mv "${STAGE_DIR}" "${CACHE_DIR}"
  exec 8>&-
  log "build complete ($((SECONDS - t0))s): ${CACHE_DIR}"
}

# build_addon MODULE MODULE_PATH VERSION CACHE BINARY LDFLAGS INSTALL: like ensure_built, for
# an add-on controller built from its own module (Kueue, Trainer) into its own cache dir:
# bin/BINARY, then `INSTALL SRC` copies what the cluster applies from the module's source
# (SRC, in GOMODCACHE) into STAGE_DIR (manifests/ for CRDs).
build_addon() {
  local module=$1 modpath=$2 version=$3 cache=$4 binary=$5 ldflags=$6 install=$7
  [[ -f ${cache}/.complete ]] && return 0
  need_go "${cache}"
  build_lock
  if [[ -f ${cache}/.complete ]]; then
    exec 8>&-
    return 0
  fi
  local t0=${SECONDS} src
  STAGE_DIR="${cache}.partial"
  rm -rf "${STAGE_DIR}" "${cache}"
  mkdir -p "${STAGE_DIR}/bin" "${STAGE_DIR}/manifests"
  log "building ${module} ${version} once into ${cache}; $(go version)"
  go_build "${module}" "${ldflags}"
  [[ -x ${STAGE_DIR}/bin/${binary} ]] || die "build produced no ${binary} (have: $(ls "${STAGE_DIR}/bin" | tr '\n' ' '))"
  src=$(module_dir "${module}" "${modpath}") || die "cannot locate ${modpath} in GOMODCACHE"
  "${install}" "${src}"
  chmod -R u+w "${STAGE_DIR}"
  {
    printf '%s %s\n' "${module}" "${version}"
    go version
    printf 'built %s in %ss\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$((SECONDS - t0))"
  } >"${STAGE_DIR}/versions.txt"
  touch "${STAGE_DIR}/.complete"
  mv "${STAGE_DIR}" "${cache}"
  exec 8>&-
  log "build complete ($((SECONDS - t0))s): ${cache}"
}

# Kueue's CRDs as the module ships them (config/components/crd/bases).
install_kueue_files() { cp "$1"/config/components/crd/bases/*.yaml "${STAGE_DIR}/manifests/"; }

# Trainer's CRDs (manifests/base/crds) and its torch-distributed ClusterTrainingRuntime, the
# runtime bridge-launch's TrainJobs name by default, as upstream ships them.
install_trainer_files() {
  cp "$1"/manifests/base/crds/trainer.kubeflow.org_*.yaml "${STAGE_DIR}/manifests/"
  cp "$1/manifests/base/runtimes/torch_distributed.yaml" "${STAGE_DIR}/torch-distributed.yaml"
}

ensure_kueue_built() {
  [[ ${KUEUE_ENABLED} == 1 ]] || return 0
  build_addon "${KUEUE_MODULE}" sigs.k8s.io/kueue "${KUEUE_VERSION}" "${KUEUE_CACHE_DIR}" kueue \
    "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=${KUEUE_VERSION}" install_kueue_files
}

ensure_trainer_built() {
  [[ ${TRAINER_ENABLED} == 1 ]] || return 0
  build_addon "${TRAINER_MODULE}" github.com/kubeflow/trainer/v2 "${TRAINER_VERSION}" \
    "${TRAINER_CACHE_DIR}" trainer-controller-manager "-s -w" install_trainer_files
}

# ---------------------------------------------------------------------------
# process helpers

# ours PID: a process of this cluster: a binary from the cache root whose command line
# names the state dir (every daemon's flags do), or this cluster's pod runner.
ours() {
  local pid=$1 exe
  exe=$(readlink "/proc/${pid}/exe" 2>/dev/null) || return 1
  if [[ ${exe} == "${CACHE_ROOT}/"* ]]; then
    tr '\0' '\n' <"/proc/${pid}/cmdline" 2>/dev/null | grep -qF -- "${STATE_DIR}/" || return 1
  else
    pod_runner_process "${pid}" || return 1
  fi
  pid_running "${pid}"
}

# pod_runner_process PID: a python (3) running a pod-runner.py (from any checkout) with
# --work-dir this state dir's pod-runner/.
pod_runner_process() {
  local exe args
  exe=$(readlink "/proc/$1/exe" 2>/dev/null) || return 1
  [[ ${exe##*/} == python* ]] || return 1
  args=$(tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null) || return 1
  grep -q -- '/pod-runner\.py$' <<<"${args}" && grep -qxF -- "${POD_RUNNER_DIR}" <<<"${args}"
}

# daemon_pid NAME: the pid of daemon NAME if its pid file names a live process of ours
# running the cached binary NAME (for pod-runner: python3 running pod-runner.py).
daemon_pid() {
  local name=$1 pid exe
  [[ -r ${RUN_DIR}/${name}.pid ]] || return 1
  pid=$(tr -dc '0-9' <"${RUN_DIR}/${name}.pid")
  [[ -n ${pid} ]] || return 1
  exe=$(readlink "/proc/${pid}/exe" 2>/dev/null) || return 1
  if [[ ${name} == pod-runner ]]; then
    pod_runner_process "${pid}" || return 1
  else
    [[ ${exe##*/} == "${name}" ]] || return 1
  fi
  ours "${pid}" || return 1
  printf '%s\n' "${pid}"
}

# all_our_pids: every live process of this cluster, pid files or not.
all_our_pids() {
  local p pid
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    if ours "${pid}"; then printf '%s\n' "${pid}"; fi
  done
}

stop_all() {
  local pids
  mapfile -t pids < <(all_our_pids)
  stop_pids "control plane" "${pids[@]}"
  stop_pod_processes
  rm -f "${RUN_DIR}"/*.pid "${RUN_DIR}/pod-runner.ready"
}

# proc_start_time PID: field 22 of /proc/PID/stat (start time in clock ticks).
proc_start_time() {
  local s
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  s=${s##*) }
  awk '{ print $20 }' <<<"${s}"
}

# stop_pod_processes: the process groups of pods the pod runner started, should the runner
# have died without stopping them (on SIGTERM it stops them itself). It records each in
# pod-runner/procs/<pid> with the process's start time, so a reused pid is not killed.
stop_pod_processes() {
  local f pid want have
  [[ -d ${POD_RUNNER_DIR}/procs ]] || return 0
  for f in "${POD_RUNNER_DIR}"/procs/*; do
    [[ -f ${f} ]] || continue
    pid=${f##*/}
    want=$(cat "${f}" 2>/dev/null) || want=
    if [[ ${pid} =~ ^[0-9]+$ && -n ${want} ]] && have=$(proc_start_time "${pid}") &&
      [[ ${have} == "${want}" ]]; then
      log "killing process group ${pid}, left by the pod runner"
      kill -KILL -- "-${pid}" 2>/dev/null || true
    fi
    rm -f "${f}"
  done
}

# start_daemon NAME ARG...: starts the cached binary NAME in its own session, with its
# output appended to logs/NAME.log; the daemon itself writes run/NAME.pid.
start_daemon() {
  local name=$1
  shift
  start_command "${name}" "${BIN_DIR}/${name}" "$@"
}

# start_command NAME COMMAND...: start_daemon with the command spelled out. COMMAND must
# exec (not fork) its way to the daemon, so that the pid written is the daemon's.
start_command() {
  local name=$1
  shift
  log "starting ${name}"
  printf '\n==== %s: %s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${name}" "$*" >>"${LOG_DIR}/${name}.log"
  # setsid: not in the caller's process group, so a test harness killing its group on
  # timeout does not take the cluster with it; 8>&- 9>&-: no inherited lock fds.
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "${RUN_DIR}/${name}.pid" \
    "$@" </dev/null >>"${LOG_DIR}/${name}.log" 2>&1 8>&- 9>&- &
}

# start_kueue ARG...: starts the cached kueue binary like start_daemon, but in a mount
# namespace of its own whose /etc is an overlay adding kueue/metrics/certs/tls.{crt,key}.
# Why: with internalCertManagement off (its cert rotator needs an in-cluster Service and
# Secret), Kueue v0.17's main reads its metrics serving certificate from the hard-coded
# /etc/kueue/metrics/certs and exits if it is missing, even with metrics disabled
# (bindAddress "0"). The overlay keeps the rest of /etc visible, writes nothing into the
# real /etc and disappears with the process. unshare (without --fork) and sh exec in
# place, so run/kueue.pid is Kueue's own pid; when not root, --map-root-user gives the
# private mount namespace (a user namespace; overlay needs Linux >= 5.11 there).
start_kueue() {
  local etc="${RUN_DIR}/kueue-etc" userns=()
  # Mount options are comma-separated: a comma in the state dir's path would split them.
  [[ ${etc} != *,* ]] || die "the state dir's path must not contain a comma for Kueue's /etc overlay: ${etc}"
  mkdir -p "${etc}/upper/kueue/metrics/certs" "${etc}/work"
  cp -f "${PKI_DIR}/kueue-metrics/tls.crt" "${PKI_DIR}/kueue-metrics/tls.key" "${etc}/upper/kueue/metrics/certs/"
  [[ $(id -u) -eq 0 ]] || userns=(--map-root-user)
  # shellcheck disable=SC2016 # $1, $2, $@ are the inner shell's
  KUBECONFIG=${KUBECONFIG_FILE} start_command kueue unshare --mount "${userns[@]}" -- \
    sh -c 'u=$1 w=$2; shift 2
      mount -t overlay overlay -o "lowerdir=/etc,upperdir=${u},workdir=${w}" /etc || exit 1
      exec "$@"' kueue-etc-overlay "${etc}/upper" "${etc}/work" \
    "${KUEUE_BIN_DIR}/kueue" "$@"
}

# start_trainer: starts the cached Trainer controller like start_daemon. Its webhook server
# reads its certificate from controller-runtime's default directory under os.TempDir(), so
# TMPDIR points into the state dir, where this script's certificate is put.
start_trainer() {
  local tmp="${RUN_DIR}/trainer-tmp" certs
  certs="${tmp}/k8s-webhook-server/serving-certs"
  mkdir -p "${certs}"
  cp -f "${PKI_DIR}/trainer-webhook/tls.crt" "${PKI_DIR}/trainer-webhook/tls.key" "${certs}/"
  TMPDIR=${tmp} KUBECONFIG=${KUBECONFIG_FILE} start_command trainer-controller-manager \
    "${TRAINER_BIN_DIR}/trainer-controller-manager" --config "${CONF_DIR}/trainer.yaml" --zap-log-level=info
}

# start_pod_runner: the stand-in kubelet for pods labelled bridge-launch.test/run=host
# (tests/k8s-control-plane/pod-runner.py); it writes run/pod-runner.ready after its first
# successful list of pods.
start_pod_runner() {
  local python keep=()
  [[ ${K8S_TEST_POD_RUNNER_KEEP:-0} == 1 ]] && keep=(--keep)
  # The interpreter itself, not a wrapper such as a pyenv shim.
  python=$(python3 -c 'import sys; print(sys.executable)') && [[ -x ${python} ]] ||
    die "'python3' not found or not working (needed by the pod runner; or set K8S_TEST_POD_RUNNER=0)"
  mkdir -p "${POD_RUNNER_DIR}"
  rm -f "${RUN_DIR}/pod-runner.ready"
  start_command pod-runner "${python}" -u "${POD_RUNNER}" --kubeconfig "${KUBECONFIG_FILE}" \
    --work-dir "${POD_RUNNER_DIR}" --ready-file "${RUN_DIR}/pod-runner.ready" "${keep[@]}"
}
pod_runner_ready() { [[ -s ${RUN_DIR}/pod-runner.ready ]]; }

# log_tails [NAME...]: the last lines of the daemons' logs (default: all).
log_tails() {
  local name names=("$@")
  [[ ${#names[@]} -gt 0 ]] || names=("${DAEMONS[@]}")
  for name in "${names[@]}"; do
    [[ -s ${LOG_DIR}/${name}.log ]] || continue
    printf '%s: ---- tail of %s ----\n' "${PROG}" "${LOG_DIR}/${name}.log" >&2
    tail -n 15 "${LOG_DIR}/${name}.log" >&2 || true
  done
}

fail_with_logs() {
  log "error: $1"
  shift
  log_tails "$@"
  exit 1
}

# port_open PORT: something accepts TCP connections on 127.0.0.1:PORT.
port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# http_get PORT PATH: GET over plain HTTP on 127.0.0.1 (no curl needed); prints the body.
http_get() {
  local port=$1 path=$2 reply
  reply=$(
    exec 3<>"/dev/tcp/127.0.0.1/${port}" || exit 1
    printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "${path}" >&3
    timeout 5 cat <&3
  ) 2>/dev/null || return 1
  [[ ${reply} == "HTTP/1."?" 200"* ]] || return 1
  printf '%s\n' "${reply#*$'\r\n\r\n'}"
}

# wait_for WHAT DAEMON CHECK...: polls CHECK until it succeeds; fails if DAEMON exits
# or after UP_TIMEOUT seconds.
# A daemon counts as gone only when missing on 3 polls in a row (a just-started one may
# not have written its pid file or exec'd its binary yet).
wait_for() {
  local what=$1 daemon=$2 deadline=$((SECONDS + UP_TIMEOUT)) misses=0
  shift 2
  while ((SECONDS < deadline)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    if [[ -n ${daemon} ]]; then
      if daemon_pid "${daemon}" >/dev/null; then misses=0; else misses=$((misses + 1)); fi
      ((misses < 3)) || fail_with_logs "${daemon} exited while waiting for ${what}" "${daemon}"
    fi
    sleep 0.3
  done
  fail_with_logs "timed out after ${UP_TIMEOUT}s waiting for ${what}" ${daemon:+"${daemon}"}
}

kc() { "${BIN_DIR}/kubectl" --kubeconfig "${KUBECONFIG_FILE}" --request-timeout=10s "$@"; }

# ---------------------------------------------------------------------------
# certificates, kubeconfig, configuration

# new_cert NAME CN ORG SANS: a key and a certificate signed by the test CA, valid as
# server and client (SANS: "IP:127.0.0.1,DNS:localhost" or empty).
new_cert() {
  local name=$1 cn=$2 org=$3 sans=$4 subj="/CN=$2"
  [[ -n ${org} ]] && subj+="/O=${org}"
  {
    printf 'basicConstraints=critical,CA:FALSE\n'
    printf 'keyUsage=critical,digitalSignature,keyEncipherment\n'
    printf 'extendedKeyUsage=serverAuth,clientAuth\n'
    [[ -n ${sans} ]] && printf 'subjectAltName=%s\n' "${sans}"
  } >"${PKI_DIR}/${name}.ext"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "${PKI_DIR}/${name}.key" -out "${PKI_DIR}/${name}.csr" -subj "${subj}" 2>/dev/null
  openssl x509 -req -in "${PKI_DIR}/${name}.csr" -CA "${PKI_DIR}/ca.crt" -CAkey "${PKI_DIR}/ca.key" \
    -CAcreateserial -days 3650 -sha256 -extfile "${PKI_DIR}/${name}.ext" \
    -out "${PKI_DIR}/${name}.crt" 2>/dev/null
  rm -f "${PKI_DIR}/${name}.csr" "${PKI_DIR}/${name}.ext"
}

readonly PKI_REV=4
ensure_pki() {
  [[ "$(cat "${PKI_DIR}/.complete" 2>/dev/null)" == "${PKI_REV}" ]] && return 0
  command -v openssl >/dev/null 2>&1 || die "'openssl' not found (Debian package openssl)"
  log "creating a test CA and certificates in ${PKI_DIR}"
  rm -rf "${PKI_DIR}"
  mkdir -p "${PKI_DIR}"
  chmod 0700 "${PKI_DIR}"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 -sha256 \
    -keyout "${PKI_DIR}/ca.key" -out "${PKI_DIR}/ca.crt" -subj "/CN=bridge-launch-test-ca" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  new_cert apiserver kube-apiserver "" \
    "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  new_cert admin bridge-launch-admin system:masters ""
  new_cert front-proxy-client front-proxy-client "" ""
  new_cert kwok kwok-kubelet "" "IP:127.0.0.1,DNS:localhost"
  mkdir -p "${PKI_DIR}/jobset-webhook"
  new_cert jobset-webhook jobset-webhook "" "IP:127.0.0.1,DNS:localhost"
  mv "${PKI_DIR}/jobset-webhook.crt" "${PKI_DIR}/jobset-webhook/tls.crt"
  mv "${PKI_DIR}/jobset-webhook.key" "${PKI_DIR}/jobset-webhook/tls.key"
  # Kueue's webhook server and its (unused but required, see start_kueue) metrics cert.
  local d
  # Trainer's webhook server too (read from its TMPDIR, see start_trainer).
  for d in kueue-webhook kueue-metrics trainer-webhook; do
    mkdir -p "${PKI_DIR}/${d}"
    new_cert "${d}" "${d}" "" "IP:127.0.0.1,DNS:localhost"
    mv "${PKI_DIR}/${d}.crt" "${PKI_DIR}/${d}/tls.crt"
    mv "${PKI_DIR}/${d}.key" "${PKI_DIR}/${d}/tls.key"
  done
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "${PKI_DIR}/sa.key" 2>/dev/null
  openssl pkey -in "${PKI_DIR}/sa.key" -pubout -out "${PKI_DIR}/sa.pub" 2>/dev/null
  chmod 0600 "${PKI_DIR}"/*.key "${PKI_DIR}"/*/tls.key
  printf '%s\n' "${PKI_REV}" >"${PKI_DIR}/.complete"
}

write_kubeconfig() {
  local tmp="${KUBECONFIG_FILE}.tmp.$$" k=("${BIN_DIR}/kubectl" config --kubeconfig "${KUBECONFIG_FILE}.tmp.$$")
  rm -f "${tmp}"
  "${k[@]}" set-cluster bridge-launch-test --server "https://127.0.0.1:${APISERVER_PORT}" \
    --certificate-authority "${PKI_DIR}/ca.crt" --embed-certs=true >/dev/null
  "${k[@]}" set-credentials bridge-launch-admin --client-certificate "${PKI_DIR}/admin.crt" \
    --client-key "${PKI_DIR}/admin.key" --embed-certs=true >/dev/null
  "${k[@]}" set-context bridge-launch-test --cluster bridge-launch-test \
    --user bridge-launch-admin --namespace default >/dev/null
  "${k[@]}" use-context bridge-launch-test >/dev/null
  chmod 0600 "${tmp}"
  mv -f "${tmp}" "${KUBECONFIG_FILE}"
}

write_configs() {
  local ca_bundle i name
  mkdir -p "${CONF_DIR}" "${POD_LOG_DIR}"
  {
    cat <<EOF
# Generated by scripts/k8s-test-cluster.sh: the JobSet controller outside a cluster.
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
EOF
    controller_config_tail "${JOBSET_WEBHOOK_PORT}" "${PKI_DIR}/jobset-webhook" "${JOBSET_HEALTH_PORT}"
  } >"${CONF_DIR}/jobset.yaml"

  # The JobSet webhooks as installed upstream (config/components/webhook, with its
  # patches), but called by URL on loopback instead of through a Service.
  ca_bundle=$(base64 -w0 <"${PKI_DIR}/ca.crt")
  local url="https://127.0.0.1:${JOBSET_WEBHOOK_PORT}"
  local selector=jobset.sigs.k8s.io/jobset-name
  {
    webhook_config Mutating jobset-mutating-webhook-configuration
    webhook_entry mjobset.kb.io "${url}/mutate-jobset-x-k8s-io-v1alpha2-jobset" jobset.x-k8s.io v1alpha2 CREATE jobsets
    webhook_entry mpod.kb.io "${url}/mutate--v1-pod" '""' v1 CREATE pods "${selector}"
    webhook_config Validating jobset-validating-webhook-configuration ---
    webhook_entry vjobset.kb.io "${url}/validate-jobset-x-k8s-io-v1alpha2-jobset" jobset.x-k8s.io v1alpha2 "CREATE, UPDATE" jobsets
    webhook_entry vpod.kb.io "${url}/validate--v1-pod" '""' v1 CREATE pods "${selector}"
  } >"${CONF_DIR}/jobset-webhooks.yaml"

  # Logs of every pod's containers (kubectl logs), unless a kwok Logs object names the
  # pod (see the docs). CRI log format: <RFC3339Nano time> <stream> <F|P> <text>.
  cat >"${POD_LOG_DIR}/default.log" <<EOF
1970-01-01T00:00:00.000000000Z stdout F kwok: this pod ran on a fake node; no container was started.
EOF
  cat >"${CONF_DIR}/kwok-logs.yaml" <<EOF
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: default-pod-logs
spec:
  logs:
  - logsFile: ${POD_LOG_DIR}/default.log
EOF

  : >"${CONF_DIR}/nodes.yaml"
  for ((i = 0; i < NODE_COUNT; i++)); do
    name="kwok-gpu-${i}"
    cat >>"${CONF_DIR}/nodes.yaml" <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: ${name}
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/hostname: ${name}
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    node.kubernetes.io/instance-type: kwok-gpu-${GPUS_PER_NODE}
    nvidia.com/gpu.present: "true"
    type: kwok
status:
  capacity: &resources
    cpu: "128"
    memory: 2Ti
    ephemeral-storage: 10Ti
    pods: "110"
    nvidia.com/gpu: "${GPUS_PER_NODE}"
    rdma/ib: "${GPUS_PER_NODE}"
  allocatable: *resources
EOF
  done

  if [[ ${KUEUE_ENABLED} == 1 ]]; then write_kueue_configs; fi
  if [[ ${TRAINER_ENABLED} == 1 ]]; then write_trainer_configs; fi

  cat >"${STATE_DIR}/env.sh" <<EOF
# Generated by scripts/k8s-test-cluster.sh: source it to use the test cluster.
export KUBECONFIG='${KUBECONFIG_FILE}'
export PATH='${BIN_DIR}':"\${PATH}"
EOF
}

# webhook_config Mutating|Validating NAME [---]: the head of a webhook configuration whose
# entries (webhook_entry) follow; with `---`, a new document of the stream.
webhook_config() {
  if [[ ${3:-} == --- ]]; then printf -- '---\n'; fi
  cat <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: $1WebhookConfiguration
metadata:
  name: $2
webhooks:
EOF
}

# webhook_entry NAME URL GROUP VERSION OPERATIONS RESOURCES [LABEL]: one entry of a
# webhook configuration, called by URL on loopback with the script's CA (ca_bundle of the
# caller); with LABEL, only for objects that carry that label (an objectSelector).
webhook_entry() {
  cat <<EOF
- name: $1
  admissionReviewVersions: [v1]
  clientConfig:
    url: $2
    caBundle: ${ca_bundle}
  failurePolicy: Fail
  sideEffects: None
EOF
  if [[ -n ${7:-} ]]; then
    cat <<EOF
  objectSelector:
    matchExpressions:
    - {key: $7, operator: Exists}
EOF
  fi
  cat <<EOF
  rules:
  - apiGroups: [$3]
    apiVersions: [$4]
    operations: [$5]
    resources: [$6]
EOF
}

# kueue_webhook NAME PATH GROUP VERSION OPERATIONS RESOURCES: an entry served by Kueue.
kueue_webhook() {
  webhook_entry "$1" "https://127.0.0.1:${KUEUE_WEBHOOK_PORT}$2" "$3" "$4" "$5" "$6"
}

# controller_config_tail WEBHOOK_PORT CERT_DIR HEALTH_PORT: what the JobSet and Kueue
# controllers' configurations share: no leader election, the webhook on loopback with this
# script's certificate (not the controller's in-cluster rotator, which needs a Service and a
# Secret), no metrics server, health on loopback.
controller_config_tail() {
  cat <<EOF
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: $1
  certDir: $2
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: 127.0.0.1:$3
EOF
}

write_kueue_configs() {
  local ca_bundle
  ca_bundle=$(base64 -w0 <"${PKI_DIR}/ca.crt")
  {
    cat <<EOF
# Generated by scripts/k8s-test-cluster.sh: the Kueue controller outside a cluster.
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
# Only what bridge-launch submits; Jobs and JobSets without the label
# kueue.x-k8s.io/queue-name are left alone (manageJobsWithoutQueueName: false).
integrations:
  frameworks:
  - jobset.x-k8s.io/jobset
  - batch/job
EOF
    if [[ ${TRAINER_ENABLED} == 1 ]]; then printf '  - trainer.kubeflow.org/trainjob\n'; fi
    controller_config_tail "${KUEUE_WEBHOOK_PORT}" "${PKI_DIR}/kueue-webhook" "${KUEUE_HEALTH_PORT}"
  } >"${CONF_DIR}/kueue.yaml"

  cat >"${CONF_DIR}/kueue-namespace.yaml" <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: kueue-system
EOF

  # Kueue's webhooks for the kinds it manages here (JobSets, Jobs) and its own kinds;
  # rules as upstream, names of the configurations apart from the JobSet ones.
  {
    webhook_config Mutating kueue-mutating-webhook-configuration
    kueue_webhook mjobset.kb.io /mutate-jobset-x-k8s-io-v1alpha2-jobset jobset.x-k8s.io v1alpha2 CREATE jobsets
    kueue_webhook mjob.kb.io /mutate-batch-v1-job batch v1 CREATE jobs
    if [[ ${TRAINER_ENABLED} == 1 ]]; then
      kueue_webhook mtrainjob.kb.io /mutate-trainer-kubeflow-org-v1alpha1-trainjob trainer.kubeflow.org v1alpha1 CREATE trainjobs
    fi
    kueue_webhook mclusterqueue.kb.io /mutate-kueue-x-k8s-io-v1beta2-clusterqueue kueue.x-k8s.io v1beta2 CREATE clusterqueues
    kueue_webhook mresourceflavor.kb.io /mutate-kueue-x-k8s-io-v1beta2-resourceflavor kueue.x-k8s.io v1beta2 CREATE resourceflavors
    kueue_webhook mworkload.kb.io /mutate-kueue-x-k8s-io-v1beta2-workload kueue.x-k8s.io v1beta2 CREATE workloads
    webhook_config Validating kueue-validating-webhook-configuration ---
    kueue_webhook vjobset.kb.io /validate-jobset-x-k8s-io-v1alpha2-jobset jobset.x-k8s.io v1alpha2 "CREATE, UPDATE" jobsets
    kueue_webhook vjob.kb.io /validate-batch-v1-job batch v1 "CREATE, UPDATE" jobs
    if [[ ${TRAINER_ENABLED} == 1 ]]; then
      kueue_webhook vtrainjob.kb.io /validate-trainer-kubeflow-org-v1alpha1-trainjob trainer.kubeflow.org v1alpha1 "CREATE, UPDATE" trainjobs
    fi
    kueue_webhook vclusterqueue.kb.io /validate-kueue-x-k8s-io-v1beta2-clusterqueue kueue.x-k8s.io v1beta2 "CREATE, UPDATE" clusterqueues
    kueue_webhook vcohort.kb.io /validate-kueue-x-k8s-io-v1beta2-cohort kueue.x-k8s.io v1beta2 "CREATE, UPDATE" cohorts
    kueue_webhook vresourceflavor.kb.io /validate-kueue-x-k8s-io-v1beta2-resourceflavor kueue.x-k8s.io v1beta2 "CREATE, UPDATE" resourceflavors
    kueue_webhook vworkload.kb.io /validate-kueue-x-k8s-io-v1beta2-workload kueue.x-k8s.io v1beta2 "CREATE, UPDATE" "workloads, workloads/status"
  } >"${CONF_DIR}/kueue-webhooks.yaml"

  # The default quota: every fake GPU in one ClusterQueue, open to every namespace, and
  # a LocalQueue in namespace default. Kueue does not admit a workload that requests a
  # resource no resource group covers, so every resource our pods may request is
  # covered; only nvidia.com/gpu is limited (to the nodes' total), the rest generously.
  cat >"${CONF_DIR}/kueue-queues.yaml" <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: ${KUEUE_FLAVOR}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: ${KUEUE_CLUSTER_QUEUE}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, ephemeral-storage, nvidia.com/gpu, rdma/ib]
    flavors:
    - name: ${KUEUE_FLAVOR}
      resources:
      - name: cpu
        nominalQuota: "1000"
      - name: memory
        nominalQuota: 100Ti
      - name: ephemeral-storage
        nominalQuota: 1000Ti
      - name: nvidia.com/gpu
        nominalQuota: "$((NODE_COUNT * GPUS_PER_NODE))"
      - name: rdma/ib
        nominalQuota: "1000"
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: ${KUEUE_LOCAL_QUEUE}
  namespace: default
spec:
  clusterQueue: ${KUEUE_CLUSTER_QUEUE}
EOF
}

# write_trainer_configs: the Trainer controller outside a cluster (its own certificate, no
# cert rotator, no leader election, health on loopback) and its webhooks as upstream installs
# them (manifests/base/webhook), called by URL on loopback.
write_trainer_configs() {
  local ca_bundle url="https://127.0.0.1:${TRAINER_WEBHOOK_PORT}" group=trainer.kubeflow.org
  ca_bundle=$(base64 -w0 <"${PKI_DIR}/ca.crt")
  cat >"${CONF_DIR}/trainer.yaml" <<EOF
# Generated by scripts/k8s-test-cluster.sh: the Kubeflow Trainer controller outside a cluster.
apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
certManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: ${TRAINER_WEBHOOK_PORT}
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: 127.0.0.1:${TRAINER_HEALTH_PORT}
EOF
  {
    webhook_config Mutating trainer-mutating-webhook-configuration
    webhook_entry defaulter.trainjob.trainer.kubeflow.org "${url}/mutate-trainer-kubeflow-org-v1alpha1-trainjob" "${group}" v1alpha1 "CREATE, UPDATE" trainjobs
    webhook_config Validating trainer-validating-webhook-configuration ---
    webhook_entry validator.clustertrainingruntime.trainer.kubeflow.org "${url}/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime" "${group}" v1alpha1 "CREATE, UPDATE" clustertrainingruntimes
    webhook_entry validator.trainingruntime.trainer.kubeflow.org "${url}/validate-trainer-kubeflow-org-v1alpha1-trainingruntime" "${group}" v1alpha1 "CREATE, UPDATE" trainingruntimes
    webhook_entry validator.trainjob.trainer.kubeflow.org "${url}/validate-trainer-kubeflow-org-v1alpha1-trainjob" "${group}" v1alpha1 "CREATE, UPDATE" trainjobs
  } >"${CONF_DIR}/trainer-webhooks.yaml"
}

# ---------------------------------------------------------------------------
# checks

apiserver_ready() { [[ "$(kc get --raw=/readyz 2>/dev/null)" == ok ]]; }
etcd_healthy() { http_get "${ETCD_PORT}" /health | grep -q '"health":"true"'; }
jobset_ready() { http_get "${JOBSET_HEALTH_PORT}" /readyz >/dev/null; }
kueue_ready() { http_get "${KUEUE_HEALTH_PORT}" /readyz >/dev/null; }
trainer_ready() { http_get "${TRAINER_HEALTH_PORT}" /readyz >/dev/null; }
# trainer_runtime_works: the torch-distributed runtime exists and a TrainJob naming it passes
# Trainer's webhooks (a server-side dry run).
trainer_runtime_works() {
  kc get clustertrainingruntime torch-distributed -o name >/dev/null 2>&1 &&
    kc create --dry-run=server -o name -f - >/dev/null 2>&1 <<'EOF'
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: webhook-probe
  namespace: default
spec:
  runtimeRef: {name: torch-distributed}
EOF
}
lease_held() {
  local holder
  holder=$(kc -n kube-system get lease "$1" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null) || return 1
  [[ -n ${holder} ]]
}
# crd_established NAME (not `kubectl wait`: it fails at once on a CRD without conditions yet).
crd_established() {
  [[ "$(kc get crd "$1" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" == True ]]
}
default_sa() { kc -n default get serviceaccount default -o name >/dev/null 2>&1; }

# crds_in DIR: the names of the CRDs in DIR (an add-on's manifests), from the file names
# (kueue.x-k8s.io_clusterqueues.yaml -> clusterqueues.kueue.x-k8s.io).
crds_in() {
  local f b
  for f in "$1"/*.yaml; do
    b=${f##*/}
    b=${b%.yaml}
    printf '%s.%s\n' "${b#*_}" "${b%%_*}"
  done
}

# queue_active KIND NAME: a Kueue ClusterQueue or LocalQueue (namespace default) reports
# Active=True, i.e. it can admit workloads.
queue_active() {
  [[ "$(kc -n default get "$1" "$2" -o jsonpath='{.status.conditions[?(@.type=="Active")].status}' 2>/dev/null)" == True ]]
}

# kueue_webhook_works: a server-side dry run of a ClusterQueue passes Kueue's webhooks.
kueue_webhook_works() {
  kc create --dry-run=server -o name -f - >/dev/null 2>&1 <<'EOF'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: webhook-probe
spec:
  namespaceSelector: {}
EOF
}

# nodes_ready: every fake node is Ready and untainted (the node lifecycle controller
# taints a node until kwok has reported it Ready).
nodes_ready() {
  local out want=${NODE_COUNT}
  out=$(kc get nodes -l type=kwok -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.status.conditions[?(@.type=="Ready")].status}{" "}{.spec.taints}{"\n"}{end}' 2>/dev/null) || return 1
  [[ $(grep -c ' True $' <<<"${out}") -eq ${want} ]]
}

# webhook_works: a server-side dry run of a JobSet passes the JobSet webhooks.
webhook_works() {
  kc create --dry-run=server -o name -f - >/dev/null 2>&1 <<'EOF'
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: webhook-probe
  namespace: default
spec:
  replicatedJobs:
  - name: w
    template:
      spec:
        template:
          spec:
            restartPolicy: Never
            containers:
            - name: c
              image: none
EOF
}

all_up() {
  local d
  [[ -f ${CACHE_DIR}/.complete && -s ${KUBECONFIG_FILE} ]] || return 1
  for d in "${DAEMONS[@]}"; do daemon_pid "${d}" >/dev/null || return 1; done
  apiserver_ready && jobset_ready && nodes_ready || return 1
  # The last steps of a complete `up` too: an `up` that failed after starting a controller
  # left it running without its webhooks, runtime or queues.
  if [[ ${KUEUE_ENABLED} == 1 ]]; then
    [[ -f ${KUEUE_CACHE_DIR}/.complete ]] && kueue_ready &&
      queue_active localqueue "${KUEUE_LOCAL_QUEUE}" || return 1
  fi
  if [[ ${TRAINER_ENABLED} == 1 ]]; then
    [[ -f ${TRAINER_CACHE_DIR}/.complete ]] && trainer_ready && trainer_runtime_works || return 1
  fi
}

check_ports_free() {
  local p
  for p in "${ETCD_PORT}" "${ETCD_PEER_PORT}" "${APISERVER_PORT}" "${KCM_PORT}" "${SCHEDULER_PORT}" \
    "${JOBSET_WEBHOOK_PORT}" "${JOBSET_HEALTH_PORT}" "${KWOK_PORT}" \
    "${KUEUE_WEBHOOK_PORT}" "${KUEUE_HEALTH_PORT}" "${TRAINER_WEBHOOK_PORT}" "${TRAINER_HEALTH_PORT}"; do
    if port_open "${p}"; then
      die "127.0.0.1:${p} is in use by another program (set K8S_TEST_PORT_BASE to move this cluster's ports)"
    fi
  done
}

# ---------------------------------------------------------------------------
# commands

start_cluster() {
  local k=${KUBECONFIG_FILE}
  start_daemon etcd --name bridge-launch-test --data-dir "${ETCD_DATA}" \
    --listen-client-urls "http://127.0.0.1:${ETCD_PORT}" \
    --advertise-client-urls "http://127.0.0.1:${ETCD_PORT}" \
    --listen-peer-urls "http://127.0.0.1:${ETCD_PEER_PORT}" \
    --initial-advertise-peer-urls "http://127.0.0.1:${ETCD_PEER_PORT}" \
    --initial-cluster "bridge-launch-test=http://127.0.0.1:${ETCD_PEER_PORT}" \
    --unsafe-no-fsync --log-level warn
  wait_for "etcd on 127.0.0.1:${ETCD_PORT}" etcd etcd_healthy

  start_daemon kube-apiserver --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
    --secure-port "${APISERVER_PORT}" \
    --etcd-servers "http://127.0.0.1:${ETCD_PORT}" \
    --tls-cert-file "${PKI_DIR}/apiserver.crt" --tls-private-key-file "${PKI_DIR}/apiserver.key" \
    --client-ca-file "${PKI_DIR}/ca.crt" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "${PKI_DIR}/sa.pub" \
    --service-account-signing-key-file "${PKI_DIR}/sa.key" \
    --service-cluster-ip-range "${SERVICE_CIDR}" \
    --authorization-mode RBAC --allow-privileged=true \
    --endpoint-reconciler-type none \
    --kubelet-client-certificate "${PKI_DIR}/admin.crt" --kubelet-client-key "${PKI_DIR}/admin.key" \
    --kubelet-certificate-authority "${PKI_DIR}/ca.crt" \
    --kubelet-preferred-address-types InternalIP \
    --requestheader-client-ca-file "${PKI_DIR}/ca.crt" --requestheader-allowed-names front-proxy-client \
    --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
    --requestheader-extra-headers-prefix X-Remote-Extra- \
    --proxy-client-cert-file "${PKI_DIR}/front-proxy-client.crt" \
    --proxy-client-key-file "${PKI_DIR}/front-proxy-client.key" \
    --profiling=false --v=1
  wait_for "kube-apiserver on https://127.0.0.1:${APISERVER_PORT}" kube-apiserver apiserver_ready

  # The CRDs go in before kube-controller-manager starts: its garbage collector learns
  # the API's resources at startup and then only every 30 s, and until it knows JobSets
  # it does not delete the Jobs, pods and Services of a deleted JobSet.
  # Kueue's CRDs too: the garbage collector deletes a JobSet's Workload through its
  # ownerReference.
  local crds=(-f "${MANIFEST_DIR}/jobset-crd.yaml" -f "${MANIFEST_DIR}/kwok-logs-crd.yaml") crd
  if [[ ${KUEUE_ENABLED} == 1 ]]; then
    crds+=(-f "${KUEUE_MANIFEST_DIR}" -f "${CONF_DIR}/kueue-namespace.yaml")
  fi
  # Trainer's too: the collector deletes a TrainJob's JobSet through its ownerReference.
  if [[ ${TRAINER_ENABLED} == 1 ]]; then crds+=(-f "${TRAINER_MANIFEST_DIR}"); fi
  kc apply --server-side --force-conflicts --field-manager bridge-launch-test-cluster \
    "${crds[@]}" >/dev/null ||
    fail_with_logs "applying the CRDs failed" kube-apiserver
  wait_for "the JobSet CRD" kube-apiserver crd_established jobsets.jobset.x-k8s.io
  wait_for "the kwok Logs CRD" kube-apiserver crd_established logs.kwok.x-k8s.io
  if [[ ${KUEUE_ENABLED} == 1 ]]; then
    for crd in $(crds_in "${KUEUE_MANIFEST_DIR}"); do
      wait_for "the Kueue CRD ${crd}" kube-apiserver crd_established "${crd}"
    done
  fi
  if [[ ${TRAINER_ENABLED} == 1 ]]; then
    for crd in $(crds_in "${TRAINER_MANIFEST_DIR}"); do
      wait_for "the Trainer CRD ${crd}" kube-apiserver crd_established "${crd}"
    done
  fi

  start_daemon kube-controller-manager --kubeconfig "${k}" \
    --authentication-kubeconfig "${k}" --authorization-kubeconfig "${k}" \
    --bind-address 127.0.0.1 --secure-port "${KCM_PORT}" \
    --service-account-private-key-file "${PKI_DIR}/sa.key" --root-ca-file "${PKI_DIR}/ca.crt" \
    --service-cluster-ip-range "${SERVICE_CIDR}" --cluster-name bridge-launch-test \
    --profiling=false --v=1
  start_daemon kube-scheduler --kubeconfig "${k}" \
    --authentication-kubeconfig "${k}" --authorization-kubeconfig "${k}" \
    --bind-address 127.0.0.1 --secure-port "${SCHEDULER_PORT}" --profiling=false --v=1

  KUBECONFIG=${k} start_daemon jobset --config "${CONF_DIR}/jobset.yaml" --zap-log-level=info
  start_daemon kwok --kubeconfig "${k}" \
    --config "${SRC_DIR}/kwok-stages.yaml" --config "${CONF_DIR}/kwok-logs.yaml" \
    --enable-crds Logs \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
    --node-ip 127.0.0.1 --node-port "${KWOK_PORT}" --server-address "127.0.0.1:${KWOK_PORT}" \
    --tls-cert-file "${PKI_DIR}/kwok.crt" --tls-private-key-file "${PKI_DIR}/kwok.key" \
    --cidr "${POD_CIDR}" --node-lease-duration-seconds 40
  # VisibilityOnDemand=false: otherwise Kueue serves an aggregated API on :8082 (all
  # addresses), which nothing here registers or uses.
  if [[ ${KUEUE_ENABLED} == 1 ]]; then
    start_kueue --config "${CONF_DIR}/kueue.yaml" --feature-gates=VisibilityOnDemand=false --zap-log-level=info
  fi
  if [[ ${TRAINER_ENABLED} == 1 ]]; then start_trainer; fi

  wait_for "the JobSet controller (readyz on 127.0.0.1:${JOBSET_HEALTH_PORT})" jobset jobset_ready
  kc apply --server-side --force-conflicts --field-manager bridge-launch-test-cluster \
    -f "${CONF_DIR}/jobset-webhooks.yaml" >/dev/null ||
    fail_with_logs "applying the JobSet webhook configurations failed" kube-apiserver
  kc apply --server-side --force-conflicts --field-manager bridge-launch-test-cluster \
    -f "${CONF_DIR}/nodes.yaml" >/dev/null ||
    fail_with_logs "creating the fake nodes failed" kube-apiserver kwok

  wait_for "the kube-controller-manager lease" kube-controller-manager lease_held kube-controller-manager
  wait_for "the kube-scheduler lease" kube-scheduler lease_held kube-scheduler
  wait_for "${NODE_COUNT} Ready fake nodes" kwok nodes_ready
  wait_for "the default ServiceAccount" kube-controller-manager default_sa
  wait_for "the JobSet webhooks (server-side dry run)" jobset webhook_works
  if [[ ${POD_RUNNER_ENABLED} == 1 ]]; then
    start_pod_runner
    wait_for "the pod runner" pod-runner pod_runner_ready
  fi
  if [[ ${TRAINER_ENABLED} == 1 ]]; then start_trainer_runtime; fi
  if [[ ${KUEUE_ENABLED} == 1 ]]; then start_kueue_queues; fi
}

# start_trainer_runtime: once Trainer is ready, registers its webhooks and installs the
# torch-distributed ClusterTrainingRuntime as upstream ships it.
start_trainer_runtime() {
  wait_for "Trainer (readyz on 127.0.0.1:${TRAINER_HEALTH_PORT})" trainer-controller-manager trainer_ready
  kc apply --server-side --force-conflicts --field-manager bridge-launch-test-cluster \
    -f "${CONF_DIR}/trainer-webhooks.yaml" >/dev/null ||
    fail_with_logs "applying the Trainer webhook configurations failed" kube-apiserver
  kc apply --server-side --force-conflicts --field-manager bridge-launch-test-cluster \
    -f "${TRAINER_RUNTIME_FILE}" >/dev/null ||
    fail_with_logs "installing the ClusterTrainingRuntime torch-distributed failed" kube-apiserver trainer-controller-manager
  wait_for "the torch-distributed runtime (server-side dry run of a TrainJob)" trainer-controller-manager trainer_runtime_works
}

# start_kueue_queues: once Kueue is ready, registers its webhooks and creates the default
# quota (config/kueue-queues.yaml), then waits until the queues can admit workloads.
start_kueue_queues() {
  wait_for "Kueue (readyz on 127.0.0.1:${KUEUE_HEALTH_PORT})" kueue kueue_ready
  kc apply --server-side --force-conflicts --field-manager bridge-launch-test-cluster \
    -f "${CONF_DIR}/kueue-webhooks.yaml" >/dev/null ||
    fail_with_logs "applying the Kueue webhook configurations failed" kube-apiserver
  wait_for "the Kueue webhooks (server-side dry run of a ClusterQueue)" kueue kueue_webhook_works
  kc apply --server-side --force-conflicts --field-manager bridge-launch-test-cluster \
    -f "${CONF_DIR}/kueue-queues.yaml" >/dev/null ||
    fail_with_logs "creating the Kueue ResourceFlavor, ClusterQueue and LocalQueue failed" kube-apiserver kueue
  wait_for "ClusterQueue ${KUEUE_CLUSTER_QUEUE} Active" kueue queue_active clusterqueue "${KUEUE_CLUSTER_QUEUE}"
  wait_for "LocalQueue default/${KUEUE_LOCAL_QUEUE} Active" kueue queue_active localqueue "${KUEUE_LOCAL_QUEUE}"
}

cmd_up() {
  local t0=${SECONDS} c
  for c in flock setsid openssl base64 sha256sum; do
    command -v "${c}" >/dev/null 2>&1 || die "'${c}' not found"
  done
  if [[ ${KUEUE_ENABLED} == 1 ]]; then
    command -v unshare >/dev/null 2>&1 ||
      die "'unshare' not found (Debian package util-linux; needed to start Kueue, or set K8S_TEST_KUEUE=0)"
  fi
  if [[ ${POD_RUNNER_ENABLED} == 1 ]]; then
    command -v python3 >/dev/null 2>&1 ||
      die "'python3' not found (needed by the pod runner, or set K8S_TEST_POD_RUNNER=0)"
  fi
  ensure_built
  ensure_kueue_built
  ensure_trainer_built
  lock
  mkdir -p "${RUN_DIR}" "${LOG_DIR}" "${CONF_DIR}"
  if all_up; then
    log "already up"
    printf '%s\n' "${KUBECONFIG_FILE}"
    return 0
  fi
  # Anything left of an earlier cluster (a crashed component, a half-finished up) goes:
  # each `up` starts from an empty etcd.
  stop_all
  rm -rf "${ETCD_DATA}" "${POD_RUNNER_DIR}/pods"
  check_ports_free
  ensure_pki
  write_kubeconfig
  write_configs
  start_cluster
  log "up ($((SECONDS - t0))s): kubernetes ${K8S_VERSION}, jobset ${JOBSET_VERSION}, kwok ${KWOK_VERSION}$([[ ${KUEUE_ENABLED} == 1 ]] && printf ', kueue %s (LocalQueue default/%s)' "${KUEUE_VERSION}" "${KUEUE_LOCAL_QUEUE}")$([[ ${TRAINER_ENABLED} == 1 ]] && printf ', trainer %s (ClusterTrainingRuntime torch-distributed)' "${TRAINER_VERSION}"); ${NODE_COUNT} nodes x ${GPUS_PER_NODE} nvidia.com/gpu; API https://127.0.0.1:${APISERVER_PORT}"
  log "use: source ${STATE_DIR}/env.sh   (KUBECONFIG and the matching kubectl ${K8S_VERSION} first in PATH)"
  printf '%s\n' "${KUBECONFIG_FILE}"
}

cmd_down() {
  lock
  stop_all
  rm -rf "${ETCD_DATA}" "${POD_RUNNER_DIR}/pods"
  log "down"
}

cmd_status() {
  local d pid ok=1
  if [[ ! -f ${CACHE_DIR}/.complete ]]; then
    log "not built yet: ${CACHE_DIR} (run: $0 up)"
  fi
  if [[ ${KUEUE_ENABLED} == 1 && ! -f ${KUEUE_CACHE_DIR}/.complete ]]; then
    log "not built yet: ${KUEUE_CACHE_DIR} (run: $0 up)"
  fi
  if [[ ${TRAINER_ENABLED} == 1 && ! -f ${TRAINER_CACHE_DIR}/.complete ]]; then
    log "not built yet: ${TRAINER_CACHE_DIR} (run: $0 up)"
  fi
  for d in "${DAEMONS[@]}"; do
    if pid=$(daemon_pid "${d}"); then
      printf '%-24s running (pid %s)\n' "${d}" "${pid}"
    else
      printf '%-24s not running\n' "${d}"
      ok=0
    fi
  done
  if ((ok)) && apiserver_ready; then
    printf 'api server               https://127.0.0.1:%s ready (kubeconfig %s)\n' "${APISERVER_PORT}" "${KUBECONFIG_FILE}"
    kc get nodes -o wide 2>&1 || ok=0
    nodes_ready || { log "not every fake node is Ready"; ok=0; }
    jobset_ready || { log "the JobSet controller is not ready"; ok=0; }
    if [[ ${POD_RUNNER_ENABLED} == 1 ]]; then
      pod_runner_ready || { log "the pod runner is not ready"; ok=0; }
    fi
    if [[ ${KUEUE_ENABLED} == 1 ]]; then
      kueue_ready || { log "Kueue is not ready"; ok=0; }
      kc get clusterqueues,localqueues -A 2>&1 || ok=0
    fi
    if [[ ${TRAINER_ENABLED} == 1 ]]; then
      trainer_ready || { log "Trainer is not ready"; ok=0; }
    fi
  else
    ok=0
  fi
  if ((ok)); then
    log "cluster is up"
    return 0
  fi
  if [[ -z "$(all_our_pids)" ]]; then log "cluster is down (run: $0 up)"; else log "cluster is not usable (run: $0 up to restart it)"; fi
  return 1
}

cmd_env() {
  printf "export KUBECONFIG='%s'\n" "${KUBECONFIG_FILE}"
  printf "export PATH='%s':\"\${PATH}\"\n" "${BIN_DIR}"
}

# lock: serialize mutating commands (parallel CI jobs may all call `up`).
lock() {
  take_state_lock "${STATE_DIR}" 300
  chmod 0700 "${STATE_DIR}"
}

main() {
  [[ $# -eq 1 ]] || { usage; exit 2; }
  case "$1" in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    build)
      ensure_built
      ensure_kueue_built
      ensure_trainer_built
      printf '%s\n' "${CACHE_DIR}"
      if [[ ${KUEUE_ENABLED} == 1 ]]; then printf '%s\n' "${KUEUE_CACHE_DIR}"; fi
      if [[ ${TRAINER_ENABLED} == 1 ]]; then printf '%s\n' "${TRAINER_CACHE_DIR}"; fi
      ;;
    env) cmd_env ;;
    -h | --help | help) usage ;;
    *) usage; exit 2 ;;
  esac
}

main "$@"
