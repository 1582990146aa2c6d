#!/usr/bin/env bash
# What a sandbox's end costs: `airlock run -- true` (make the sandbox, run
# the command, remove the sandbox: its TCP sockets looked for and ended,
# its links and entries removed), timed from start to return, ROUNDS times
# each for build/airlock and for BASE (another airlock binary, e.g. an
# earlier build), interleaved, each with pins of its own, in a network
# namespace of its own with only loopback. Prints the medians and the
# ratio. Run as root after scripts/build.sh: BASE=/path/to/airlock.
set -euo pipefail
cd "$(dirname "$0")/.."
base=${BASE:?BASE=/path/to/another/airlock}
rounds=${ROUNDS:-20}
work=$(mktemp -d /tmp/airlock-teardown.XXXXXX)
ns=alteardown$$
ip netns add "$ns"
cleanup() {
  for t in a b; do
    build/airlock --bpf-dir "/sys/fs/bpf/airlock-td$t-$$" --state-dir "/run/airlock-td$t-$$" \
      --cgroup-parent "airlock-td$t-$$" uninstall >/dev/null 2>&1 || true
  done
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ip -n "$ns" link set lo up
cat > "$work/policy.json" <<'JSON'
{"version": 1, "name": "teardown", "on_violation": "deny",
 "rules": [{"action": "allow", "cidr": "127.0.0.1/32", "ports": [9099], "protocol": "tcp"}]}
JSON
once() {  # BINARY TAG -> microseconds
  local s e
  s=$(date +%s%N)
  nsenter --net="/run/netns/$ns" "$1" --bpf-dir "/sys/fs/bpf/airlock-td$2-$$" --state-dir "/run/airlock-td$2-$$" \
    --cgroup-parent "airlock-td$2-$$" run --name td --policy "$work/policy.json" -- true 2>/dev/null
  e=$(date +%s%N)
  echo $(((e - s) / 1000))
}
once "$base" a >/dev/null
once build/airlock b >/dev/null
for _ in $(seq "$rounds"); do
  echo "base $(once "$base" a)"
  echo "this $(once build/airlock b)"
done > "$work/times"
median() { grep "^$1 " "$work/times" | awk '{print $2}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
b=$(median base) t=$(median this)
echo "airlock run -- true, median of $rounds: base ${b} us, this build ${t} us, ratio $(awk -v t="$t" -v b="$b" 'BEGIN {printf "%.3f", t / b}')"
