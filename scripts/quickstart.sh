#!/usr/bin/env bash
# Quick start: install what airlock needs to build and run (not the test
# tools), build it, and run one sandbox on the bundled default policy.
# Inside it, curl makes one allowed request (to a demo server on
# 127.0.0.1:PORT) and one denied one (127.0.0.1:9999); the denial is
# refused in the kernel, the sandbox is quarantined and frozen, and then
# killed from outside with `airlock kill`.
#
#   scripts/quickstart.sh [--port PORT]     (or AIRLOCK_QUICKSTART_PORT; default 8080)
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: scripts/quickstart.sh [--port PORT]" >&2; exit 1; }
port=${AIRLOCK_QUICKSTART_PORT:-8080}
while (($#)); do
  case $1 in
    --port) (($# >= 2)) || usage; port=$2; shift 2 ;;
    --port=*) port=${1#--port=}; shift ;;
    *) usage ;;
  esac
done
if ! [[ $port =~ ^[0-9]+$ ]] || ((port < 1 || port > 65535)); then
  echo "scripts/quickstart.sh: --port $port: not a TCP port (1-65535)" >&2
  exit 1
fi
denied_port=9999
((port != denied_port)) || denied_port=9998
if [[ $(id -u) -ne 0 ]]; then
  echo "scripts/quickstart.sh: run as root" >&2
  exit 1
fi
step() { printf '\n== [%s/4] %s\n' "$1" "$2"; }
step 1 "Debian packages airlock needs to build and run (the missing ones)"
scripts/deps.sh run
step 2 "building airlock (a few minutes on 2 cores the first time)"
# cmake's own progress lines, one per file compiled.
AIRLOCK_TESTS=OFF scripts/build.sh airlock | sed -n -E 's/^(\[ *[0-9]+%\]) (Building|Linking).*[/ ]([^/ ]+)$/  \1 \2 \3/p'
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

step 3 "a demo service on 127.0.0.1:$port"
echo "hello from the demo service" > "$work/index.html"
python3 -u -m http.server "$port" --bind 127.0.0.1 --directory "$work" >"$work/server.log" 2>&1 &
server_pid=$!
# Listening once it says so; gone if the port is taken.
for _ in $(seq 100); do
  grep -q '^Serving HTTP' "$work/server.log" && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if ! grep -q '^Serving HTTP' "$work/server.log"; then
  echo "scripts/quickstart.sh: the demo service cannot listen on 127.0.0.1:$port ($(tail -1 "$work/server.log")): choose another port with --port" >&2
  exit 1
fi
policy=policies/default.json
if ((port != 8080)); then
  # The bundled policy allows the demo service on 8080: the same policy, on this port.
  policy=$work/default.json
  python3 -c 'import json, sys
p = json.load(open("policies/default.json"))
p["rules"][0]["ports"] = [int(sys.argv[2])]
json.dump(p, open(sys.argv[1], "w"), indent=2)' "$policy" "$port"
  echo "policy: policies/default.json with the demo service on port $port ($policy)"
fi

step 4 "airlock run --policy $policy -- <curl allowed, then curl denied>"
"$AIRLOCK" run --policy "$policy" --name quickstart --audit-log "$work/audit.jsonl" --user nobody -- \
  sh -c 'curl -sS -o /dev/null -w "allowed: GET http://127.0.0.1:$0/ -> HTTP %{http_code}\n" "http://127.0.0.1:$0/"
         curl -sS --max-time 5 "http://127.0.0.1:$1/" || echo "denied: connect to 127.0.0.1:$1 refused in the kernel"
         sleep 30; echo "not reached: the sandbox is frozen"' "$port" "$denied_port" &
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
