#!/usr/bin/env bash
# The unit, BPF and kernel integration tests again, built with clang-14,
# AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer into
# build-san/, and a short run of every fuzz target (docs/testing.md). The
# BPF object is built as in build/. Not here: the qemu vmtest, the alerting
# rules, clang-tidy, the Debian package and the deployment files (labels vm,
# rules, static, package and deploy), which test no code of ours that the
# sanitizers instrument.
#
# Every sanitized process, the agent and what it forks included, writes its
# report to build-san/sanitizer-reports/ as well as exiting non-zero: a
# report from a process whose status no test looks at (a daemon killed at
# the end of a test) still fails the run. Arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) -ne 0 ]]; then
  echo "scripts/test-sanitized.sh: run as root (the kernel tests attach BPF programs to cgroups)" >&2
  exit 1
fi
CC=clang-14 CXX=clang++-14 cmake -S . -B build-san -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAIRLOCK_TESTS=ON \
  -DAIRLOCK_SANITIZE=ON -DAIRLOCK_FUZZ=ON >/dev/null
cmake --build build-san -j"$(nproc)"

reports=$PWD/build-san/sanitizer-reports
rm -rf "$reports"
mkdir -p "$reports"
chmod 1777 "$reports"  # commands run as nobody inside a sandbox write here too
common="log_path=$reports/report:log_exe_name=1:print_stacktrace=1:halt_on_error=1"
export ASAN_OPTIONS="$common:detect_leaks=1:check_initialization_order=1:strict_init_order=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="$common:${UBSAN_OPTIONS:-}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-}"

cd build-san
status=0
ctest --output-on-failure --timeout 600 -LE '^(vm|rules|static|package|deploy)$' -j"$(nproc)" "$@" || status=$?
if compgen -G "$reports/*" >/dev/null; then
  for r in "$reports"/*; do
    echo "==== $r"
    cat "$r"
  done
  echo "scripts/test-sanitized.sh: sanitizer reports above" >&2
  status=1
fi
exit $status
