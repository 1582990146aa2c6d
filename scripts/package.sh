#!/usr/bin/env bash
# Builds the Debian package into build-deb/ (configured for /usr and /etc),
# without the tests; prints the .deb's path. Through ccache where it is
# installed (scripts/ccache.sh): after scripts/build.sh it recompiles little.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ccache.sh
cmake -S . -B build-deb -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAIRLOCK_TESTS=OFF -DCMAKE_INSTALL_PREFIX=/usr \
  "${AIRLOCK_CCACHE[@]}" >/dev/null
cmake --build build-deb -j"$(nproc)" >/dev/null
(cd build-deb && cpack -G DEB >/dev/null)
ls "$PWD"/build-deb/airlock_*.deb
