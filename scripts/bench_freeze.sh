#!/usr/bin/env bash
# Freeze latency (violation -> cgroup.events `frozen 1`) when the violation
# comes at once after the sandbox starts and 100 ms after it, TRIALS (200)
# of each, and the time from the violating call to its task being stopped
# (state T) where the kernel stops it in the call. BASELINE=PATH measures
# another airlock binary too, in the same run. Run as root after
# scripts/build.sh (AIRLOCK=PATH: measure that binary instead of build/airlock).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /run/airlock-freeze.XXXXXX)  # not /tmp: the client runs as nobody
chmod 755 "$work"
cleanup() {
  for l in after before; do
    rm -rf "/sys/fs/bpf/airlock-bench-freeze-$l"
    rmdir "/sys/fs/cgroup/unified/airlock-bench-freeze-$l" "/sys/fs/cgroup/airlock-bench-freeze-$l" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
cc -O2 -o "$work/violate" bench/violate.c
cc -O2 -o "$work/stopwatch" bench/stopwatch.c
cat > "$work/freeze.json" <<'JSON'
{"version": 1, "name": "bench-freeze", "on_violation": "freeze",
 "rules": [{"action": "allow", "cidr": "127.0.0.2/32", "ports": [9]}]}
JSON
python3 bench/freeze_bench.py --airlock "${AIRLOCK:-build/airlock}" --work "$work" --trials "${TRIALS:-200}" --label after
if [[ -n ${BASELINE:-} ]]; then
  python3 bench/freeze_bench.py --airlock "$BASELINE" --work "$work" --trials "${TRIALS:-200}" --label before
fi
