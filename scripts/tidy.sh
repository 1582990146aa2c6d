#!/usr/bin/env bash
# clang-tidy over userspace/ with the project's .clang-tidy: any finding
# fails. Run after scripts/build.sh (it reads build/compile_commands.json).
set -euo pipefail
cd "$(dirname "$0")/.."
tidy=$(command -v clang-tidy-14 || command -v clang-tidy)
# At the lowest priority: in the test suite it runs beside the kernel
# tests, whose timeouts matter more than its own.
find userspace -name '*.cpp' -print0 | sort -z |
  nice -n 19 xargs -0 -P"$(nproc)" -n4 "$tidy" -p build --quiet 2>/dev/null
echo "clang-tidy: userspace clean"
