#!/usr/bin/env bash
# Installs the Debian packages bridge-launch needs to build, test and lint. Idempotent:
# packages already present are skipped, and apt-get runs only when something is missing.
# Needs root (or sudo). The Slurm test cluster's packages are installed by
# scripts/slurm-test-cluster.sh, which `make test` calls. The Kubernetes test control plane
# (scripts/k8s-test-cluster.sh) needs openssl here, and Go with its module proxy for its
# one-time build. python3-jsonschema and python3-yaml check `bridge-launch schema` against the
# example recipes; zsh and fish run the completion tests (skipped where they are missing).
set -euo pipefail

packages=(
  build-essential cmake ccache git pkg-config make
  libcli11-dev libspdlog-dev libfmt-dev libyaml-cpp-dev libyaml-dev
  nlohmann-json3-dev libkainjow-mustache-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  clang clang-format clang-tidy libclang-rt-14-dev
  python3 python3-yaml python3-jsonschema
  zsh fish
  procps iproute2 util-linux
  openssl
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present" >&2
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done" >&2
