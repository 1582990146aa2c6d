#!/usr/bin/env bash
# The Debian package, installed and removed for real: files in their FHS
# places, the unit hardened (systemd-analyze security <= 5), the man page and
# bash completion working, the proxy's system user made; removal refused
# while an attached sandbox has processes, done with
# AIRLOCK_UNINSTALL_FORCE=1 (the process runs on, detached), every pin and state file gone, the configuration kept until
# purge. Uses airlock's default paths: refuses to run where the package is
# installed or airlock is in use under them (sandbox records, a daemon).
set -euo pipefail
cd "$(dirname "$0")/../.."
fail() { echo "FAIL: $*" >&2; exit 1; }
if dpkg-query -W -f='${Status}' airlock 2>/dev/null | grep -q installed; then
  fail "the airlock package is installed here already; this test installs and removes it"
fi
if compgen -G '/run/airlock/sandboxes/*' >/dev/null || [[ -S /run/airlock/control.sock ]]; then
  fail "airlock is in use here under its default paths (sandboxes or a daemon's socket in /run/airlock)"
fi

had_proxy_user=$(getent passwd airlock-proxy || true)
cg_root=$(findmnt -n -t cgroup2 -o TARGET | head -1)
cg=$cg_root/airlock-pkg-test-$$
sleeper=""
cleanup() {
  set +e  # the test's status is decided; cleaning up must not change it
  [[ -n $sleeper ]] && kill "$sleeper" 2>/dev/null && wait "$sleeper" 2>/dev/null
  if dpkg-query -W -f='${Status}' airlock 2>/dev/null | grep -q installed; then
    AIRLOCK_UNINSTALL_FORCE=1 dpkg -P airlock >/dev/null 2>&1 || true
  fi
  # The cgroup empties once the killed process is reaped.
  for _ in $(seq 50); do
    [[ -d $cg ]] || break
    rmdir "$cg" 2>/dev/null && break
    sleep 0.1
  done
  rm -rf /sys/fs/bpf/airlock /run/airlock
  # The package keeps the proxy's user on purge; the test does not.
  if [[ -z $had_proxy_user ]] && getent passwd airlock-proxy >/dev/null; then
    userdel airlock-proxy
    getent group airlock-proxy >/dev/null && groupdel airlock-proxy
  fi
}
trap cleanup EXIT

deb=$(scripts/package.sh)
echo "package: $deb"
dpkg -i "$deb" >/dev/null

[[ $(/usr/bin/airlock --version) == *0.* ]] || fail "airlock --version"
# The world's proxy has a system user of its own, no shell, no home.
IFS=: read -r _ _ puid _ _ phome pshell < <(getent passwd airlock-proxy) || fail "no user airlock-proxy"
[[ $puid -lt 1000 && $phome == /nonexistent && $pshell == /usr/sbin/nologin ]] ||
  fail "airlock-proxy is uid $puid, home $phome, shell $pshell"
for f in /usr/bin/airlock /usr/lib/systemd/system/airlock.service /usr/share/man/man1/airlock.1 \
  /usr/share/bash-completion/completions/airlock /etc/airlock/airlock.json /etc/airlock/policies/default.json \
  /usr/share/airlock/policies/research-agent.json /usr/share/airlock/dashboards/airlock.json \
  /usr/share/airlock/prometheus/airlock-alerts.yml /usr/share/doc/airlock/operations.md \
  /usr/share/doc/airlock/examples/airlock.json /usr/share/containers/oci/hooks.d/airlock.json \
  /usr/share/airlock/kubernetes/airlock.yaml; do
  [[ -f $f ]] || fail "$f is not installed"
done
grep -qx 'ExecStart=/usr/bin/airlock daemon --config /etc/airlock/airlock.json' /usr/lib/systemd/system/airlock.service ||
  fail "the unit's ExecStart"
python3 -c 'import json,sys; h=json.load(open(sys.argv[1])); assert h["hook"]["path"]=="/usr/bin/airlock" and h["hook"]["args"]==["airlock","oci-hook"] and h["stages"]==["createRuntime"], h' \
  /usr/share/containers/oci/hooks.d/airlock.json || fail "the OCI hook's definition"
score=$(cd / && systemd-analyze security --offline=true /usr/lib/systemd/system/airlock.service 2>/dev/null |
  sed -nE 's/.*Overall exposure level for airlock.service: ([0-9.]+).*/\1/p')
echo "systemd-analyze security: $score"
awk -v s="$score" 'BEGIN { exit !(s != "" && s <= 5.0) }' || fail "exposure $score is over 5.0"
[[ $(man -w airlock) == /usr/share/man/man1/airlock.1* ]] || fail "man -w airlock"
completed=$(bash -c 'source /usr/share/bash-completion/bash_completion
  source /usr/share/bash-completion/completions/airlock
  COMP_WORDS=(airlock --log-level info unin); COMP_CWORD=3; COMP_LINE="airlock --log-level info unin"; COMP_POINT=${#COMP_LINE}
  _airlock; echo "${COMPREPLY[*]}"')
[[ $completed == uninstall ]] || fail "completion of 'unin' gave '$completed'"
/usr/bin/airlock policy check /etc/airlock/policies/default.json /usr/share/airlock/policies/*.json >/dev/null

# A cgroup with a process in it, attached under the default paths.
mkdir "$cg"
sh -c 'echo $$ > "$0/cgroup.procs" && exec sleep 600' "$cg" &
sleeper=$!
for _ in $(seq 50); do grep -q 'populated 1' "$cg/cgroup.events" && break; sleep 0.1; done
/usr/bin/airlock attach --cgroup "$cg" --policy /etc/airlock/policies/default.json --name pkgtest \
  --audit-log /var/log/airlock/pkg-test.jsonl >/dev/null
[[ -d /sys/fs/bpf/airlock && -d /run/airlock ]] || fail "attach made no pins or state"

if dpkg -r airlock >/tmp/airlock-pkg-remove.$$ 2>&1; then
  fail "removal went on while sandbox pkgtest has a process"
fi
grep -q "sandbox 'pkgtest' has processes in $cg" /tmp/airlock-pkg-remove.$$ || { cat /tmp/airlock-pkg-remove.$$; fail "the refusal does not name the sandbox"; }
rm -f /tmp/airlock-pkg-remove.$$
[[ -x /usr/bin/airlock && -d /sys/fs/bpf/airlock ]] || fail "a refused removal took something away"

AIRLOCK_UNINSTALL_FORCE=1 dpkg -r airlock >/dev/null
kill -0 "$sleeper" || fail "the detached cgroup's process was killed"
[[ ! -e /usr/bin/airlock && ! -e /usr/lib/systemd/system/airlock.service && ! -e /usr/share/containers/oci/hooks.d/airlock.json ]] ||
  fail "files left after dpkg -r"
[[ ! -e /sys/fs/bpf/airlock && ! -e /run/airlock ]] || fail "pins or state left after dpkg -r"
[[ -f /etc/airlock/airlock.json ]] || fail "dpkg -r removed the configuration"
dpkg -P airlock >/dev/null
[[ ! -e /etc/airlock/airlock.json && ! -e /var/log/airlock ]] || fail "dpkg -P left the configuration or logs"
echo "package: installed, checked and removed"
