#!/usr/bin/env bash
# What a redirect to the world costs: bench/world_bench inside `airlock run`,
# alternating in each round between a server of its own on loopback (allowed,
# direct) and 203.0.113.10:80 (redirected to the sandbox's recorder). Prints
# each round and the median ratios. Run as root after scripts/build.sh.
#
# MODE=gate: what the SNI gate costs instead. In a network namespace of its
# own, with vmtests/dnsd answering allowed.test (127.0.0.1) on
# 127.0.0.1:53, the same exchanges go directly to 127.0.0.1:8444 and through
# a gated rule for allowed.test to 127.0.0.1:8443 (the proxy reads the
# ClientHello, the agent connects, the proxy splices). Both servers are the
# bench's, in the sandbox: the plain rule allows every port of 127.0.0.1 but
# the gated one (their answers go to the clients' ports).
#
# MODE=target: what a redirect to a target of one's own costs. The bench's
# server listens on 127.0.0.1:8090; the same exchanges go to it directly
# and to 203.0.113.10:80, which a rule redirects to "127.0.0.1:8090": the
# kernel's rewrite, the origin kept and filed, the egress check and the
# entry's removal at close are the only difference.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-7}
CONNS=${CONNS:-1000}
BODY=${BODY:-8388608}
MODE=${MODE:-world}
work=$(mktemp -d /tmp/airlock-bench-world.XXXXXX)
ns=airlock-bench-gate-$$
dnsd_pid=
cleanup() {
  [[ -z $dnsd_pid ]] || kill "$dnsd_pid" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$work" /sys/fs/bpf/airlock-bench-world
  rmdir /sys/fs/cgroup/unified/airlock-bench-world 2>/dev/null || true
}
trap cleanup EXIT
cc -O2 -pthread -o "$work/world_bench" bench/world_bench.c
chmod 755 "$work" "$work/world_bench"
python3 - "$work/policy.json" "$work/world" "$MODE" <<'PY'
import json, sys
if sys.argv[3] == "gate":
    p = {"version": 1, "name": "bench-gate",
         "rules": [{"action": "allow", "cidr": "127.0.0.1/32", "ports": ["1024-8442", "8444-65535"], "protocol": "tcp"},
                   {"action": "allow", "domain": "allowed.test", "ports": [8443], "protocol": "tcp",
                    "tls": {"sni": "require"}}],
         "dns": {"resolvers": ["127.0.0.1"], "types": ["A"]}}
elif sys.argv[3] == "target":
    p = {"version": 1, "name": "bench-target",
         "rules": [{"action": "allow", "cidr": "127.0.0.1/32", "protocol": "tcp"},
                   {"action": "redirect", "cidr": "203.0.113.0/24", "protocol": "tcp", "to": "127.0.0.1:8090"}]}
else:
    p = {"version": 1, "name": "bench-world",
         "rules": [{"action": "allow", "cidr": "127.0.0.1/32", "protocol": "tcp"},
                   {"action": "redirect", "cidr": "203.0.113.0/24", "protocol": "tcp", "to": "world"}],
         "world": {"records": sys.argv[2], "max_body_bytes": 1024, "dns": "resolvers"}}
json.dump(p, open(sys.argv[1], "w"))
PY
A=(build/airlock --bpf-dir /sys/fs/bpf/airlock-bench-world --state-dir "$work/state" --cgroup-parent airlock-bench-world)
if [[ $MODE == gate ]]; then
  cc -O2 -o "$work/dnsd" vmtests/dnsd.c
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  (cd "$work" && exec nsenter --net="/run/netns/$ns" "$work/dnsd") & dnsd_pid=$!
  name=bench-gate
  records=/var/log/airlock/world/$name.jsonl
  rm -f "$records"
  nsenter --net="/run/netns/$ns" "${A[@]}" run --policy "$work/policy.json" --name $name \
    --audit-log "$work/audit.jsonl" -- "$work/world_bench" --gate allowed.test 127.0.0.1:8443 "$ROUNDS" "$CONNS" \
    "$BODY" 2>"$work/run.log" | tee "$work/rounds" || { cat "$work/run.log" >&2; exit 1; }
  echo "records: $(wc -l < "$records") lines, $(grep -c '"verdict":"pass"' "$records") passed"
  rm -f "$records"
  via=gate
elif [[ $MODE == target ]]; then
  "${A[@]}" run --policy "$work/policy.json" --name bench-target --audit-log "$work/audit.jsonl" -- \
    "$work/world_bench" --target 8090 203.0.113.10:80 "$ROUNDS" "$CONNS" "$BODY" 2>"$work/run.log" |
    tee "$work/rounds" || { cat "$work/run.log" >&2; exit 1; }
  via=target
else
  "${A[@]}" run --policy "$work/policy.json" --name bench-world --audit-log "$work/audit.jsonl" -- \
    "$work/world_bench" 203.0.113.10:80 "$ROUNDS" "$CONNS" "$BODY" 2>"$work/run.log" | tee "$work/rounds" ||
    { cat "$work/run.log" >&2; exit 1; }
  echo "records: $(wc -l < "$work/world/bench-world.jsonl") lines"
  via=world
fi
python3 - "$work/rounds" "$via" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
via = sys.argv[2]
def med(k): return statistics.median(r[k] for r in rows)
conn = statistics.median(r[via + "_conn_us"] / r["direct_conn_us"] for r in rows)
post = statistics.median(r[via + "_post_mbps"] / r["direct_post_mbps"] for r in rows)
print(f"connection + GET + answer: direct median {med('direct_conn_us'):.1f} us, {via} median "
      f"{med(via + '_conn_us'):.1f} us, ratio median {conn:.3f} (added {med(via + '_conn_us') - med('direct_conn_us'):.1f} us)")
print(f"POST body: direct median {med('direct_post_mbps'):.0f} MB/s, {via} median {med(via + '_post_mbps'):.0f} MB/s, "
      f"ratio median {post:.3f}")
PY
