#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs every test,
# then the unit, BPF and kernel tests again against a sanitized build, and
# the fuzz targets (scripts/test-sanitized.sh). Ends with its wall time and
# one closing line: "N passed, N failed".
#
# Kernel tests need root; each creates and removes its own cgroups, network
# namespaces and bpffs pins, so they run in parallel (AIRLOCK_TEST_JOBS,
# default twice the cores). The sanitized tree is compiled while the first
# run's tests go on (at the lowest CPU priority: the tests' waits leave the
# cores idle most of the time). Arguments go to every CTest run;
# AIRLOCK_SANITIZED=0 leaves the sanitized run out. docs/testing.md gives the
# time budget and how it was measured.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) -ne 0 ]]; then
  echo "scripts/test.sh: run as root (the kernel tests attach BPF programs to cgroups)" >&2
  exit 1
fi
start=$SECONDS
scripts/deps.sh
scripts/build.sh
source scripts/testlib.sh
export AIRLOCK_TEST_COUNTS=$PWD/build/test-logs/counts
mkdir -p build/test-logs
: >"$AIRLOCK_TEST_COUNTS"

sanitized=${AIRLOCK_SANITIZED:-1}
san_build=""
if [[ $sanitized != 0 ]]; then
  nice -n 19 scripts/test-sanitized.sh --build-only >build/test-logs/sanitized-build.log 2>&1 &
  san_build=$!
fi
# If this script stops early, so does the build it started.
trap '[[ -n $san_build ]] && kill "$san_build" 2>/dev/null; true' EXIT

status=0
run_ctest main build --timeout 300 "$@" || status=1
if [[ -n $san_build ]]; then
  echo "waiting for the sanitized build (build/test-logs/sanitized-build.log)"
  if wait "$san_build"; then
    san_build=""
    scripts/test-sanitized.sh --no-build "$@" || status=1
  else
    san_build=""
    tail -n 30 build/test-logs/sanitized-build.log
    echo "scripts/test.sh: the sanitized build failed" >&2
    echo "sanitized-build 0 1 0" >>"$AIRLOCK_TEST_COUNTS"
    status=1
  fi
fi

echo
echo "test runs (passed, failed, seconds):"
awk '{printf "  %-26s %5d %5d %6d\n", $1, $2, $3, $4; p += $2; f += $3} END {print ""; print "wall time: '"$((SECONDS - start))"' s"; printf "%d passed, %d failed\n", p, f}' "$AIRLOCK_TEST_COUNTS"
exit $status
