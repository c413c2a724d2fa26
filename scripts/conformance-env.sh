#!/usr/bin/env bash
# conformance-env.sh — the Python environment of the conformance suite (tests/conformance/):
# the released Megatron-Bridge, Megatron-Core and torch from PyPI in Python 3.12.
#
# Installed once per machine into
#   ${XDG_CACHE_HOME:-$HOME/.cache}/bridge-launch/conformance-<release>-<hash of the pins>/venv
# (about 7 GB; the first install takes about 10 minutes), then reused by every clone.
# Prints the venv's python on its last line of stdout.
#
# Usage: scripts/conformance-env.sh [RELEASE]   (default 0.6.2; pins in
#        tests/conformance/requirements-RELEASE.txt)
# Environment: CONFORMANCE_PYTHON (a Python 3.12 interpreter; default: pyenv's 3.12, then
# python3.12 on PATH), CONFORMANCE_CACHE_DIR (cache root).
set -euo pipefail
readonly ROOT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly RELEASE=${1:-0.6.2}
readonly PINS="$ROOT_DIR/tests/conformance/requirements-$RELEASE.txt"
readonly CACHE_ROOT="${CONFORMANCE_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/bridge-launch}"
log() { echo "conformance-env: $*" >&2; }

[[ -f "$PINS" ]] || { log "no pins for release $RELEASE ($PINS)"; exit 2; }
hash=$(sha256sum "$PINS" | cut -c1-12)
dir="$CACHE_ROOT/conformance-$RELEASE-$hash"
venv="$dir/venv"
if [[ -f "$dir/ready" ]]; then
  echo "$venv/bin/python"
  exit 0
fi

find_python() {
  if [[ -n "${CONFORMANCE_PYTHON:-}" ]]; then echo "$CONFORMANCE_PYTHON"; return; fi
  local root=${PYENV_ROOT:-$HOME/.pyenv} p
  for p in "$root"/versions/3.12*/bin/python3.12; do
    [[ -x "$p" ]] && { echo "$p"; return; }
  done
  command -v python3.12 || true
}
python=$(find_python)
[[ -n "$python" ]] || { log "needs Python 3.12 (megatron-bridge $RELEASE requires >=3.12,<3.13)"; exit 1; }

# One installer at a time per cache dir; a second waits for the first.
mkdir -p "$dir"
exec 9>"$dir/lock"
flock 9
if [[ -f "$dir/ready" ]]; then echo "$venv/bin/python"; exit 0; fi
log "installing megatron-bridge $RELEASE and its pins into $venv (once per machine; slow)"
start=$SECONDS
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r "$PINS" >&2
# Fails here, not in the middle of the suite, when the set does not import.
"$venv/bin/python" -c 'import megatron.core, torch, omegaconf' >&2
touch "$dir/ready"
log "installed in $((SECONDS - start)) s"
echo "$venv/bin/python"
