#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs every test,
# then runs them again sanitized (scripts/test-sanitized.sh).
# Kernel tests need root; they create and remove their own cgroups, network
# namespaces and bpffs pins.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) -ne 0 ]]; then
  echo "scripts/test.sh: run as root (the kernel tests attach BPF programs to cgroups)" >&2
  exit 1
fi
scripts/deps.sh
scripts/build.sh
status=0
(cd build && ctest --output-on-failure --timeout 300 "$@") || status=$?
# The same tests built with the sanitizers, and the fuzz targets' short runs
# (AIRLOCK_SANITIZED=0 skips them).
if [[ ${AIRLOCK_SANITIZED:-1} != 0 ]]; then
  scripts/test-sanitized.sh || status=1
fi
exit $status
