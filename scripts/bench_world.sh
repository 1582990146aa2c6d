#!/usr/bin/env bash
# What a redirect to the world costs: bench/world_bench inside `airlock run`,
# alternating in each round between a server of its own on loopback (allowed,
# direct) and 203.0.113.10:80 (redirected to the sandbox's recorder). Prints
# each round and the median ratios. Run as root after scripts/build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-7}
CONNS=${CONNS:-1000}
BODY=${BODY:-8388608}
work=$(mktemp -d /tmp/airlock-bench-world.XXXXXX)
trap 'rm -rf "$work"; rm -rf /sys/fs/bpf/airlock-bench-world; rmdir /sys/fs/cgroup/unified/airlock-bench-world 2>/dev/null || true' EXIT
cc -O2 -pthread -o "$work/world_bench" bench/world_bench.c
chmod 755 "$work" "$work/world_bench"
python3 - "$work/policy.json" "$work/world" <<'PY'
import json, sys
json.dump({"version": 1, "name": "bench-world",
           "rules": [{"action": "allow", "cidr": "127.0.0.1/32", "protocol": "tcp"},
                     {"action": "redirect", "cidr": "203.0.113.0/24", "protocol": "tcp", "to": "world"}],
           "world": {"records": sys.argv[2], "max_body_bytes": 1024, "dns": "resolvers"}},
          open(sys.argv[1], "w"))
PY
A=(build/airlock --bpf-dir /sys/fs/bpf/airlock-bench-world --state-dir "$work/state" --cgroup-parent airlock-bench-world)
"${A[@]}" run --policy "$work/policy.json" --name bench-world --audit-log "$work/audit.jsonl" -- \
  "$work/world_bench" 203.0.113.10:80 "$ROUNDS" "$CONNS" "$BODY" 2>"$work/run.log" | tee "$work/rounds" ||
  { cat "$work/run.log" >&2; exit 1; }
echo "records: $(wc -l < "$work/world/bench-world.jsonl") lines"
python3 - "$work/rounds" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def med(k): return statistics.median(r[k] for r in rows)
conn = statistics.median(r["world_conn_us"] / r["direct_conn_us"] for r in rows)
post = statistics.median(r["world_post_mbps"] / r["direct_post_mbps"] for r in rows)
print(f"connection + GET + answer: direct median {med('direct_conn_us'):.1f} us, world median "
      f"{med('world_conn_us'):.1f} us, ratio median {conn:.3f} (added {med('world_conn_us') - med('direct_conn_us'):.1f} us)")
print(f"POST body: direct median {med('direct_post_mbps'):.0f} MB/s, world median {med('world_post_mbps'):.0f} MB/s, "
      f"ratio median {post:.3f}")
PY
