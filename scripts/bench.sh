#!/usr/bin/env bash
# Hook overhead: bench/egress_bench outside any sandbox, then inside one whose
# policy allows loopback among 200 other prefixes, alternating, in one run.
# Prints each round and the median ratio. Run as root after scripts/build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
N=${N:-20000}
work=$(mktemp -d /tmp/airlock-bench.XXXXXX)
trap 'rm -rf "$work"; rm -rf /sys/fs/bpf/airlock-bench; rmdir /sys/fs/cgroup/unified/airlock-bench 2>/dev/null || true' EXIT
cc -O2 -o "$work/egress_bench" bench/egress_bench.c
python3 - "$work/policy.json" <<'PY'
import json, sys
rules = [{"action": "allow", "cidr": f"10.{i // 256}.{i % 256}.0/24", "ports": [443]} for i in range(200)]
rules.append({"action": "allow", "cidr": "127.0.0.1/32"})
json.dump({"version": 1, "name": "bench", "rules": rules}, open(sys.argv[1], "w"))
PY
cg=$(awk '$9 == "cgroup2" && $4 == "/" {print $5; exit}' /proc/self/mountinfo)
A=(build/airlock --bpf-dir /sys/fs/bpf/airlock-bench --state-dir "$work/state" --cgroup-parent airlock-bench)
for i in $(seq "$ROUNDS"); do
  base=$("$work/egress_bench" "$N")
  sand=$("${A[@]}" run --policy "$work/policy.json" --name bench --audit-log "$work/audit.jsonl" -- "$work/egress_bench" "$N" 2>/dev/null)
  echo "round $i: baseline $base sandboxed $sand"
  echo "$base $sand" >> "$work/rounds"
done
python3 - "$work/rounds" <<'PY'
import json, statistics, sys
rows = [l.split("} {") for l in open(sys.argv[1])]
b = [json.loads(r[0] + "}") for r in rows]
s = [json.loads("{" + r[1]) for r in rows]
for k in ("tcp_connect_ns", "udp_sendto_ns"):
    ratios = [y[k] / x[k] for x, y in zip(b, s)]
    print(f"{k}: baseline median {statistics.median(x[k] for x in b):.0f} ns, sandboxed median "
          f"{statistics.median(y[k] for y in s):.0f} ns, ratio median {statistics.median(ratios):.3f}")
PY
