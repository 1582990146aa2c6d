#!/usr/bin/env bash
# Configures and builds airlock into build/. Arguments are build targets
# (default: everything, tests included; AIRLOCK_TESTS=OFF leaves the tests
# out, and what they need to be configured). Compiles through ccache where
# it is installed (scripts/deps.sh installs it with the test tools), so that
# the package's build tree (scripts/package.sh) and a second clone reuse
# what this one compiled.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ccache.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAIRLOCK_TESTS="${AIRLOCK_TESTS:-ON}" "${AIRLOCK_CCACHE[@]}" >/dev/null
if (($#)); then
  cmake --build build -j"$(nproc)" --target "$@"
else
  cmake --build build -j"$(nproc)"
fi
