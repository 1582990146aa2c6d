#!/usr/bin/env bash
# What the HTTP gate costs (docs/gate.md, "What the gate costs"): in a
# network namespace of its own, where vmtests/dnsd answers allowed.test
# with 127.0.0.1, bench/gate_bench.py inside `airlock run` sends the same
# HTTPS exchanges to bench/gate_origin.py directly (127.0.0.1:8444, an
# allowed address) and through an inspected rule for allowed.test:8443
# (the gate ends the client's TLS, parses, scans for the policy's secret,
# judges, opens its own verified TLS to the origin and streams the answer
# back). Both ways are TLS, both Python's http.client, alternating in each
# round which goes first. Prints each round, the median ratios and the
# proxy's peak resident memory. Run as root after scripts/build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-7}
REQUESTS=${REQUESTS:-2000}
BYTES=${BYTES:-268435456}
work=$(mktemp -d /tmp/airlock-bench-gate.XXXXXX)
ns=airlock-bench-http-$$
dnsd_pid= origin_pid= sampler_pid=
cleanup() {
  [[ -z $sampler_pid ]] || kill "$sampler_pid" 2>/dev/null || true
  [[ -z $origin_pid ]] || kill "$origin_pid" 2>/dev/null || true
  [[ -z $dnsd_pid ]] || kill "$dnsd_pid" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$work" /sys/fs/bpf/airlock-bench-gate
  rm -f /var/log/airlock/world/bench-http-gate.jsonl
  rmdir /sys/fs/cgroup/unified/airlock-bench-gate 2>/dev/null || true
}
trap cleanup EXIT
chmod 755 "$work"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=allowed.test \
  -addext "subjectAltName=DNS:allowed.test,IP:127.0.0.1" -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
chmod 644 "$work/cert.pem"
head -c 32 /dev/urandom | base64 > "$work/secret"
python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
p = {"version": 1, "name": "bench-http-gate",
     "secrets": {"token": {"file": w + "/secret"}},
     "rules": [{"action": "allow", "cidr": "127.0.0.1/32", "ports": ["1024-8442", "8444-65535"], "protocol": "tcp"},
               {"action": "allow", "domain": "allowed.test", "ports": [8443], "protocol": "tcp",
                "http": [{"methods": ["GET"], "path": "/small"}, {"methods": ["GET"], "path": "/big"}],
                "tls": {"upstream_ca": w + "/cert.pem"}}],
     "dns": {"resolvers": ["127.0.0.1"], "types": ["A", "AAAA"]}}
json.dump(p, open(w + "/policy.json", "w"))
PY
chmod 600 "$work/secret"
cc -O2 -o "$work/dnsd" vmtests/dnsd.c
ip netns add "$ns"
ip -n "$ns" link set lo up
(cd "$work" && exec nsenter --net="/run/netns/$ns" "$work/dnsd") & dnsd_pid=$!
nsenter --net="/run/netns/$ns" /usr/bin/python3 -u bench/gate_origin.py "$work/cert.pem" "$work/key.pem" 8443 8444 \
  >"$work/origin.log" 2>&1 & origin_pid=$!
for _ in $(seq 100); do grep -q serving "$work/origin.log" && break; sleep 0.05; done
echo "nameserver 127.0.0.1" >"$work/resolv.conf"
# The proxy's peak resident memory (VmHWM), read every 100 ms while it runs.
(
  peak=0
  while :; do
    for p in $(pgrep -f "airlock proxy --sandbox bench-http-gate" || true); do
      r=$(awk '/VmHWM/ {print $2}' "/proc/$p/status" 2>/dev/null || true)
      [[ -n $r && $r -gt $peak ]] && peak=$r && echo "$peak" >"$work/proxy_peak_kb"
    done
    sleep 0.1
  done
) & sampler_pid=$!
A=(build/airlock --bpf-dir /sys/fs/bpf/airlock-bench-gate --state-dir "$work/state" --cgroup-parent airlock-bench-gate)
# The client resolves through dnsd: its own mount namespace's resolv.conf.
nsenter --net="/run/netns/$ns" unshare --mount --propagation private -- /bin/sh -c \
  'mount --bind "$0" /etc/resolv.conf && exec "$@"' "$work/resolv.conf" "${A[@]}" run --policy "$work/policy.json" --name bench-http-gate \
  --audit-log "$work/audit.jsonl" -- /usr/bin/python3 bench/gate_bench.py "$work/cert.pem" 8444 8443 "$ROUNDS" \
  "$REQUESTS" "$BYTES" 2>"$work/run.log" | tee "$work/rounds" || { cat "$work/run.log" >&2; exit 1; }
records=/var/log/airlock/world/bench-http-gate.jsonl
echo "records: $(grep -c '"kind":"http-gate"' "$records") requests, $(grep -c '"status":200' "$records") answered 200"
echo "the proxy's peak resident memory: $(cat "$work/proxy_peak_kb" 2>/dev/null || echo '?') kB"
python3 - "$work/rounds" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def med(k): return statistics.median(r[k] for r in rows)
lat = [r["gate_request_us"] / r["direct_request_us"] for r in rows]
dl = [r["gate_download_mbps"] / r["direct_download_mbps"] for r in rows]
print(f"request on a kept-alive connection: direct median {med('direct_request_us'):.1f} us, gate median "
      f"{med('gate_request_us'):.1f} us, ratio median {statistics.median(lat):.3f} ({min(lat):.3f}-{max(lat):.3f}), "
      f"added {med('gate_request_us') - med('direct_request_us'):.1f} us")
print(f"download: direct median {med('direct_download_mbps'):.0f} MB/s, gate median {med('gate_download_mbps'):.0f} MB/s, "
      f"ratio median {statistics.median(dl):.3f} ({min(dl):.3f}-{max(dl):.3f})")
PY
