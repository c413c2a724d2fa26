#!/usr/bin/env bash
# prefetch-caches.sh — starts the slow one-time steps of `make test` in the background, so that
# on a new machine they overlap the C++ build instead of following it:
#   - the Kubernetes test control plane's Go build (scripts/k8s-test-cluster.sh build; nice 19),
#   - the conformance suite's Python environment (scripts/conformance-env.sh; mostly download).
# Each is a no-op when its cache under ~/.cache/bridge-launch is complete, and each holds a
# lock, so the suite that needs it later waits for the background run instead of starting a
# second one. Their output goes to ~/.cache/bridge-launch/prefetch-*.log.
set -uo pipefail
cd "$(dirname "$0")/.."
logs="${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/bridge-launch"
mkdir -p "$logs"
start() {
  local name=$1; shift
  nohup "$@" >"$logs/prefetch-$name.log" 2>&1 </dev/null &
  echo "prefetch: $name in the background (pid $!, log $logs/prefetch-$name.log)"
}
start k8s-control-plane bash scripts/k8s-test-cluster.sh build
start conformance-env bash scripts/conformance-env.sh
