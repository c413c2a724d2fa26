#!/usr/bin/env bash
# Builds the .deb with CPack, checks its contents, installs it with apt (which pulls its
# dependencies), runs the installed bridge-launch, and removes the package again.
# Usage: scripts/check-package.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-${BUILD_DIR:-build}}
(cd "$BUILD_DIR" && cpack -G DEB >/dev/null)
deb=$(ls -t "$BUILD_DIR"/bridge-launch_*.deb | head -n1)
size=$(stat -c %s "$deb")
echo "check-package: built $deb ($((size / 1024)) KiB)"
# Stripped binaries (CPACK_STRIP_FILES): an unstripped package was 99 MB.
if ((size > 10 * 1024 * 1024)); then
  echo "check-package: the package is larger than 10 MiB; are the binaries stripped?"
  exit 1
fi
contents=$(dpkg-deb -c "$deb")
for f in ./usr/bin/bridge-launch ./usr/bin/bridge-probe ./usr/share/man/man1/bridge-launch.1 \
         ./usr/share/bash-completion/completions/bridge-launch ./usr/share/bridge-launch/templates; do
  grep -q " $f" <<<"$contents" || { echo "check-package: $f missing from the package"; exit 1; }
done
# dpkg-shlibdeps must have computed the dependencies. bridge-launch links its C++ libraries
# and libyaml statically (BRIDGE_STATIC_RUNTIME), so only the C/C++ runtime packages may appear.
depends=$(dpkg-deb -f "$deb" Depends)
grep -q "libc6" <<<"$depends" || { echo "check-package: Depends lacks libc6: $depends"; exit 1; }
if grep -q "BRIDGE_STATIC_RUNTIME:BOOL=ON" "$BUILD_DIR/CMakeCache.txt" &&
   grep -Eq "libyaml|libspdlog|libfmt" <<<"$depends"; then
  echo "check-package: the static-runtime build still depends on a shared library: $depends"
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "check-package: not root; skipping the install test"
  exit 0
fi
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$(realpath "$deb")" >/dev/null
trap 'DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq bridge-launch >/dev/null' EXIT
/usr/bin/bridge-launch --help | grep -q "Usage: bridge-launch" || { echo "check-package: installed --help failed"; exit 1; }
/usr/bin/bridge-launch --version
man -w bridge-launch >/dev/null 2>&1 || test -f /usr/share/man/man1/bridge-launch.1
echo "check-package: installed and ran bridge-launch from the package"
