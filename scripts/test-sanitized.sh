#!/usr/bin/env bash
# The unit, BPF and kernel integration tests again, against airlock built
# with clang-14, AddressSanitizer (with LeakSanitizer) and
# UndefinedBehaviorSanitizer into build-san/, and a short run of every fuzz
# target (docs/testing.md). The BPF object is built as in build/. Not here:
# the qemu vmtest, the alerting rules, clang-tidy, the Debian package and the
# deployment files (labels vm, rules, static, package and deploy), which test
# no code of ours that the sanitizers instrument.
#
# build-san/ holds the agent and every test that links its code (unit, BPF,
# fuzz: target sanitized_targets). The kernel tests are build/'s harness and
# clients (test code, built once by scripts/build.sh) driving
# build-san/airlock through AIRLOCK_TEST_BIN: every process of airlock's,
# the agent and what it forks, is the sanitized one.
#
# Every sanitized process writes its report to build-san/sanitizer-reports/
# as well as exiting non-zero: a report from a process whose status no test
# looks at (a daemon killed at the end of a test) still fails the run.
#
#   scripts/test-sanitized.sh [--build-only | --no-build] [CTEST ARGS...]
# --build-only builds build-san/ and stops; --no-build runs the tests of the
# build-san/ already there. CTest arguments go to both CTest runs.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) -ne 0 ]]; then
  echo "scripts/test-sanitized.sh: run as root (the kernel tests attach BPF programs to cgroups)" >&2
  exit 1
fi
stage=all
case "${1:-}" in
  --build-only) stage=build; shift ;;
  --no-build) stage=test; shift ;;
esac
source scripts/ccache.sh
source scripts/testlib.sh

if [[ $stage != test ]]; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B build-san -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAIRLOCK_TESTS=ON \
    -DAIRLOCK_SANITIZE=ON -DAIRLOCK_FUZZ=ON "${AIRLOCK_CCACHE[@]}" >/dev/null
  cmake --build build-san -j"$(nproc)" --target sanitized_targets
  [[ $stage == build ]] && exit 0
  # The kernel tests' harness and clients (nothing to do after scripts/build.sh).
  scripts/build.sh integration_tests
fi

reports=$PWD/build-san/sanitizer-reports
rm -rf "$reports"
mkdir -p "$reports"
chmod 1777 "$reports"  # commands run as nobody inside a sandbox write here too
common="log_path=$reports/report:log_exe_name=1:print_stacktrace=1:halt_on_error=1"
export ASAN_OPTIONS="$common:detect_leaks=1:check_initialization_order=1:strict_init_order=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="$common:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-}"

status=0
run_ctest sanitized-unit-bpf-fuzz build-san --timeout 600 -L '^(unit|bpf|fuzz)$' "$@" || status=1
AIRLOCK_TEST_BIN=$PWD/build-san/airlock run_ctest sanitized-kernel build --timeout 600 -L '^kernel$' "$@" || status=1
if compgen -G "$reports/*" >/dev/null; then
  for r in "$reports"/*; do
    echo "==== $r"
    cat "$r"
  done
  echo "scripts/test-sanitized.sh: sanitizer reports above" >&2
  status=1
fi
exit $status
