#!/usr/bin/env bash
# DNS timings: a resolver (dnsmasq) and a TCP listener in a network
# namespace of their own, a client namespace with no other route. The same
# client runs without airlock (baseline) and inside `airlock run` whose policy
# allows *.allowed.test on port 9000: the time of an allowed lookup, of a
# denied one (which must fail at once, not time out), and whether the first
# connect after each lookup succeeds. Run as root after scripts/build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-200}
work=$(mktemp -d /tmp/airlock-dnsbench.XXXXXX)
c=alb-c$$ s=alb-s$$
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  ip netns del "$c" 2>/dev/null || true
  ip netns del "$s" 2>/dev/null || true
  rm -rf "$work" /sys/fs/bpf/airlock-dnsbench
  rmdir "$(awk '$9 == "cgroup2" && $4 == "/" {print $5; exit}' /proc/self/mountinfo)/airlock-dnsbench" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$c"
ip netns add "$s"
ip link add veth-c netns "$c" type veth peer name veth-s netns "$s"
ip -n "$c" link set lo up
ip -n "$s" link set lo up
ip -n "$c" addr add 10.78.0.1/24 dev veth-c
ip -n "$s" addr add 10.78.0.2/24 dev veth-s
ip -n "$s" addr add 10.78.0.53/24 dev veth-s
ip -n "$c" link set veth-c up
ip -n "$s" link set veth-s up
ip netns exec "$s" /usr/sbin/dnsmasq --keep-in-foreground --no-resolv --no-hosts --bind-interfaces \
  --listen-address=10.78.0.53 --pid-file= --user=root --log-queries --log-facility="$work/dnsmasq.log" \
  --address=/allowed.test/10.78.0.2 --address=/denied.test/10.78.0.2 &
pids+=($!)
ip netns exec "$s" python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.78.0.2", 9000)); s.listen(512)
while True:
    c, _ = s.accept(); c.close()' &
pids+=($!)
echo "nameserver 10.78.0.53" > "$work/resolv.conf"
echo '{"version": 1, "name": "dnsbench", "on_violation": "deny",
       "rules": [{"action": "allow", "domain": "*.allowed.test", "ports": [9000], "protocol": "tcp"}],
       "dns": {"resolvers": ["10.78.0.53"], "types": ["A"], "queries_per_second": 10000, "query_burst": 10000}}' \
  > "$work/policy.json"
for _ in $(seq 50); do ip netns exec "$c" python3 -c 'import socket; socket.create_connection(("10.78.0.2", 9000), 0.2)' 2>/dev/null && break; sleep 0.1; done
A="build/airlock --bpf-dir /sys/fs/bpf/airlock-dnsbench --state-dir $work/state --cgroup-parent airlock-dnsbench"
inner="mount --bind $work/resolv.conf /etc/resolv.conf"
nsenter --net=/run/netns/"$c" unshare -m sh -c "$inner; exec python3 bench/dns_bench.py $N 10.78.0.2 9000" > "$work/base.json"
# Per-program run time (kernel.bpf_stats_enabled) during the sandboxed run;
# the programs are looked up by their pins while the sandbox runs.
stats_was=$(sysctl -n kernel.bpf_stats_enabled)
sysctl -q kernel.bpf_stats_enabled=1
trap 'sysctl -q kernel.bpf_stats_enabled="$stats_was"; cleanup' EXIT
nsenter --net=/run/netns/"$c" unshare -m sh -c "$inner; exec $A run --policy $work/policy.json --name dnsbench --audit-log $work/audit.jsonl -- sh -c 'python3 bench/dns_bench.py $N 10.78.0.2 9000; for p in al_egress al_ingress al_connect4; do bpftool -j prog show pinned /sys/fs/bpf/airlock-dnsbench/progs/\$p > $work/\$p.stats; done'" 2>/dev/null > "$work/sand.json"
sysctl -q kernel.bpf_stats_enabled="$stats_was"
python3 - "$work/base.json" "$work/sand.json" "$work/dnsmasq.log" <<'PY'
import json, statistics, sys
b, s = (json.load(open(p)) for p in sys.argv[1:3])
log = open(sys.argv[3]).read()
med = statistics.median
print(f"N = {b['n']}")
print(f"allowed lookup: baseline median {med(b['allowed_us']):.0f} us, sandboxed median {med(s['allowed_us']):.0f} us, "
      f"ratio {med(s['allowed_us']) / med(b['allowed_us']):.2f}")
print(f"denied lookup: baseline resolves it in {med(b['denied_us']):.0f} us (median); sandboxed it fails in "
      f"{med(s['denied_us']):.0f} us (median), {max(s['denied_us']):.0f} us at most; resolved in the sandbox: "
      f"{s['denied_resolved']}")
print(f"first connect after a lookup: baseline {b['connect_ok']}/{b['resolved']}, sandboxed {s['connect_ok']}/{s['resolved']}")
print(f"denied names the resolver received from the sandbox run: "
      f"{sum(1 for l in log.splitlines() if 'denied.test' in l and 'query[' in l) - b['n']}")
PY
python3 - "$work" <<'PY'
import json, sys
for p in ("al_egress", "al_ingress", "al_connect4"):
    j = json.load(open(f"{sys.argv[1]}/{p}.stats"))
    n = j.get("run_cnt", 0)
    print(f"{p}: {n} runs in the sandboxed run, {j.get('run_time_ns', 0) / max(n, 1):.0f} ns per run")
PY
