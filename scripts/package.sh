#!/usr/bin/env bash
# Builds the Debian package into build-deb/ (configured for /usr and /etc),
# without the tests; prints the .deb's path.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-deb -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAIRLOCK_TESTS=OFF -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
cmake --build build-deb -j"$(nproc)" >/dev/null
(cd build-deb && cpack -G DEB >/dev/null)
ls "$PWD"/build-deb/airlock_*.deb
