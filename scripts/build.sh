#!/usr/bin/env bash
# Configures and builds airlock into build/. Arguments are build targets
# (default: everything, tests included; AIRLOCK_TESTS=OFF leaves the tests
# out, and what they need to be configured).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAIRLOCK_TESTS="${AIRLOCK_TESTS:-ON}" >/dev/null
if (($#)); then
  for t in "$@"; do cmake --build build -j"$(nproc)" --target "$t"; done
else
  cmake --build build -j"$(nproc)"
fi
