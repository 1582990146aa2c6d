#!/usr/bin/env bash
# Many sandboxes on one node: one daemon, N sandboxes made through it
# (`airlock sandbox create`), each with the same 201-rule policy. Measures,
# in one run, with 1 sandbox and then with N: the hook cost inside a sandbox
# (bench/egress_bench), kernel memory of airlock's maps, the daemon's memory
# and idle CPU, `airlock status`, the time to make a sandbox, and the freeze
# latency of a violation. Run as root after scripts/build.sh. N=300 default.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/airlock-scale.XXXXXX)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/egress_bench" bench/egress_bench.c
python3 bench/scale_bench.py --work "$work" --bench "$work/egress_bench" --sandboxes "${N:-300}" \
  --rounds "${ROUNDS:-5}" --calls "${CALLS:-20000}"
