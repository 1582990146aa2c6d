#!/usr/bin/env bash
# A sandbox that floods airlock with denials: one `--user nobody` process in
# `airlock run` (on_violation deny) makes denied TCP connects to loopback as
# fast as it can for FLOOD_SECONDS (10). Reports, per airlock binary, the
# denials the kernel counted, the audit bytes written, and the agent's CPU
# (utime+stime of the `airlock run` process, /proc/PID/stat) over the flood.
#
# BASELINE=PATH also measures another airlock binary in the same run (built
# from the commit before the kernel's event rate limit: see
# docs/benchmarks.md). Run as root after scripts/build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
FLOOD_SECONDS=${FLOOD_SECONDS:-10}
work=$(mktemp -d /run/airlock-flood.XXXXXX)  # not /tmp: the flooder runs as nobody
chmod 755 "$work"  # the flooder runs as nobody and writes its progress files here
cleanup() {
  for l in after before; do
    rm -rf "/sys/fs/bpf/airlock-bench-flood-$l"
  done
  rmdir /sys/fs/cgroup/unified/airlock-bench-flood /sys/fs/cgroup/airlock-bench-flood 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cc -O2 -o "$work/connect_flood" bench/connect_flood.c
mkdir -m 777 "$work/run"
cat > "$work/policy.json" <<'JSON'
{"version": 1, "name": "bench-flood", "on_violation": "deny",
 "rules": [{"action": "allow", "cidr": "127.0.0.2/32", "ports": [9]}]}
JSON
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
bytes() { cat "$@" 2>/dev/null | wc -c; }
wait_file() { for _ in $(seq 3000); do [[ -e $1 ]] && return 0; sleep 0.01; done; return 1; }

measure() {
  local label=$1 bin=$2
  local A=("$bin" --bpf-dir "/sys/fs/bpf/airlock-bench-flood-$label" --state-dir "$work/state-$label"
           --cgroup-parent airlock-bench-flood)
  # (An audit log's directory is its own: older builds chmod it 0750.)
  local log="$work/logs-$label/audit.jsonl" r="$work/run/$label"
  mkdir -m 777 "$r"
  "${A[@]}" run --standalone --policy "$work/policy.json" --name "flood-$label" --audit-log "$log" --user nobody -- \
    "$work/connect_flood" 127.0.0.9 9 "$FLOOD_SECONDS" "$r/start" "$r/done" "$r/go" > "$work/out-$label" 2> "$work/err-$label" &
  local pid=$!
  wait_file "$r/start"
  local t0 s0 b0 t1 s1 b1
  t0=$(ticks $pid); s0=$(date +%s.%N); b0=$(bytes "$log"*)
  wait_file "$r/done" || { echo "$label: the flood did not finish" >&2; cat "$work/err-$label" >&2; exit 1; }
  t1=$(ticks $pid); s1=$(date +%s.%N); b1=$(bytes "$log"*)
  local st
  st=$("${A[@]}" status --json)
  touch "$r/go"
  wait $pid || true
  local b2
  b2=$(bytes "$log"*)
  python3 - "$label" "$st" "$work/out-$label" "$log" "$t0" "$t1" "$s0" "$s1" "$b0" "$b1" "$b2" "$hz" <<'PY'
import glob, json, sys
label, st, out, log = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
t0, t1, s0, s1, b0, b1, b2, hz = (float(x) for x in sys.argv[5:13])
sb = [s for s in st["sandboxes"] if s["name"] == "flood-" + label][0]
c = sb["counters"]
client = json.loads(open(out).read().strip().splitlines()[-1])
lines = decisions = suppressed = summaries = 0
for f in glob.glob(log + "*"):
    for l in open(f):
        lines += 1
        j = json.loads(l)
        if j.get("event") == "decision":
            decisions += 1
        elif j.get("event") == "suppressed":
            summaries += 1
            suppressed += j["count"]
wall = s1 - s0
print(f"{label}: {client['eperm']} denied connects in {wall:.2f} s "
      f"(kernel counted {c['decisions']['connect4']['deny']}, lost {c['events_lost']}); "
      f"audit log +{(b1 - b0) / 1e6:.3f} MB during the flood, {b2 / 1e6:.3f} MB in all "
      f"({lines} lines: {decisions} decisions, {summaries} summaries counting {suppressed}); "
      f"agent CPU {(t1 - t0) / hz:.2f} s = {100 * (t1 - t0) / hz / wall:.1f} % of one core")
PY
}

measure after "${AIRLOCK:-build/airlock}"
if [[ -n ${BASELINE:-} ]]; then
  measure before "$BASELINE"
fi
