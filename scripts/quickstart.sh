#!/usr/bin/env bash
# Quick start: install, build, and run one sandbox on the bundled default
# policy. Inside it, curl makes one allowed request (to a demo server on
# 127.0.0.1:8080) and one denied one (127.0.0.1:9999); the denial is
# refused in the kernel, the sandbox is quarantined and frozen, and then
# killed from outside with `airlock kill`.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) -ne 0 ]]; then
  echo "scripts/quickstart.sh: run as root" >&2
  exit 1
fi
scripts/deps.sh
scripts/build.sh airlock >/dev/null
AIRLOCK=build/airlock
work=$(mktemp -d /tmp/airlock-quickstart.XXXXXX)
server_pid=""
run_pid=""
cleanup() {
  [[ -n $run_pid ]] && kill "$run_pid" 2>/dev/null || true
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "hello from the demo service" > "$work/index.html"
python3 -m http.server 8080 --bind 127.0.0.1 --directory "$work" >/dev/null 2>&1 &
server_pid=$!
for _ in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:8080/ && break; sleep 0.1; done

echo "== airlock run --policy policies/default.json -- <curl allowed, then curl denied>"
"$AIRLOCK" run --policy policies/default.json --name quickstart --audit-log "$work/audit.jsonl" --user nobody -- \
  sh -c 'curl -sS -o /dev/null -w "allowed: GET http://127.0.0.1:8080/ -> HTTP %{http_code}\n" http://127.0.0.1:8080/
         curl -sS --max-time 5 http://127.0.0.1:9999/ || echo "denied: connect to 127.0.0.1:9999 refused in the kernel"
         sleep 30; echo "not reached: the sandbox is frozen"' &
run_pid=$!

for _ in $(seq 100); do
  grep -q '"event":"frozen"' "$work/audit.jsonl" 2>/dev/null && break
  sleep 0.1
done
echo "== airlock status"
"$AIRLOCK" status
echo "== audit log"
cat "$work/audit.jsonl"
echo "== airlock kill quickstart"
"$AIRLOCK" kill quickstart
set +e
wait "$run_pid"
status=$?
set -e
run_pid=""
echo "== airlock run exited with $status (121: killed by airlock kill)"
[[ $status -eq 121 ]]
echo "== airlock uninstall (the pins, the cgroup parent and the state this demo left)"
"$AIRLOCK" uninstall || echo "(left in place: airlock is in use on this machine)"
