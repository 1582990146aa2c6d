#!/usr/bin/env bash
# Boots Debian 12's own 6.1 kernel under qemu (TCG) with an initramfs that
# holds build/airlock, and checks there that every program passes that
# kernel's verifier, attaches, and decides: an allowed loopback connect
# delivers its payload, a denied one fails and is in the audit log; and the
# containment that does not depend on the unix hooks holds there too: socket
# families outside the list fail and are recorded, a uid-0 command cannot
# leave its cgroup, a DNS query with an unlisted EDNS option never reaches
# the resolver, on_violation kill ends the sandbox; where 6.1 lacks a
# mechanism (unix hooks, a signal from sock_addr programs) airlock says so.
# World mode records a request and a datagram; a redirect to a target is
# told its original destination (SO_ORIGINAL_DST); the SNI gate passes the
# rule's name and denies another over its address; the HTTP gate sends a
# request its entries allow and answers another 403; a byte budget cuts an
# upload at its limit and refuses the rule's next connect, and the socket
# that held the refused bytes is ended before the programs are detached.
# Needs: qemu-system-x86, busybox-static, and the kernel package, which this
# script downloads from Debian's archive with apt-get (nothing is installed).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build/airlock ]] || { echo "vmtests/run.sh: build/airlock is missing (scripts/build.sh)" >&2; exit 1; }
work=$(mktemp -d /tmp/airlock-vm.XXXXXX)
trap 'rm -rf "$work"' EXIT
cache=${AIRLOCK_VM_CACHE:-/var/cache/airlock-vm}
mkdir -p "$cache"

kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
[[ -n $kpkg ]] || { echo "vmtests/run.sh: cannot resolve linux-image-amd64" >&2; exit 1; }
if ! ls "$cache/$kpkg"_*.deb >/dev/null 2>&1; then
  (cd "$cache" && apt-get download "$kpkg" >/dev/null 2>&1)
fi
dpkg-deb -x "$cache/$kpkg"_*.deb "$work/k"
kernel=$(ls "$work"/k/boot/vmlinuz-*)
kmods=$(ls -d "$work"/k/lib/modules/*/kernel)

root="$work/root"
mkdir -p "$root"/{bin,sbin,etc,proc,sys,dev,tmp,lib64,usr/lib}
cp /bin/busybox "$root/bin/busybox"
for app in sh mount mkdir cat grep echo sleep ip nc poweroff ls uname insmod dd wc; do ln -s busybox "$root/bin/$app"; done
cp build/airlock "$root/bin/airlock"
cc -O2 -static -o "$root/bin/dnsd" vmtests/dnsd.c
cc -O2 -static -o "$root/bin/probe" vmtests/probe.c
# sock_diag for TCP (modules in Debian's kernel, loaded on demand where
# modprobe exists): how airlock finds a target's listener.
mkdir -p "$root/lib/modules"
cp "$kmods/net/ipv4/inet_diag.ko" "$kmods/net/ipv4/tcp_diag.ko" "$root/lib/modules/"
for lib in $(ldd build/airlock | awk '/=> \// {print $3} /^\t\/lib64/ {print $1}'); do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
cat > "$root/policy.json" <<'JSON'
{"version": 1, "name": "vm", "on_violation": "deny",
 "rules": [{"action": "allow", "cidr": "127.0.0.1/32", "ports": [8080], "protocol": "tcp"},
           {"action": "allow", "domain": "allowed.test", "ports": [8082], "protocol": "tcp"}],
 "dns": {"resolvers": ["127.0.0.1"], "types": ["A"]}}
JSON
sed 's/"on_violation": "deny"/"on_violation": "kill"/; s/"name": "vm"/"name": "vm-kill"/' "$root/policy.json" > "$root/policy-kill.json"
cat > "$root/world.json" <<'JSON'
{"version": 1, "name": "vm-world", "on_violation": "deny",
 "rules": [{"action": "redirect", "cidr": "0.0.0.0/0", "to": "world"},
           {"action": "redirect", "cidr": "::/0", "to": "world"}],
 "world": {"records": "/tmp/world"}}
JSON
cat > "$root/gate.json" <<'JSON'
{"version": 1, "name": "vm-gate", "on_violation": "deny",
 "rules": [{"action": "allow", "domain": "allowed.test", "ports": [8443], "protocol": "tcp", "tls": {"sni": "require"}}],
 "dns": {"resolvers": ["127.0.0.1"], "types": ["A"]}}
JSON
cat > "$root/http.json" <<'JSON'
{"version": 1, "name": "vm-http", "on_violation": "deny",
 "rules": [{"action": "allow", "domain": "allowed.test", "ports": [8480], "protocol": "tcp",
            "http": [{"methods": ["GET"], "path": "/pub/*"}]}],
 "dns": {"resolvers": ["127.0.0.1"], "types": ["A"]}}
JSON
cat > "$root/target.json" <<'JSON'
{"version": 1, "name": "vm-target", "on_violation": "deny",
 "rules": [{"action": "redirect", "cidr": "203.0.113.0/24", "protocol": "tcp", "to": "127.0.0.1:8090"}]}
JSON
cat > "$root/budget.json" <<'JSON'
{"version": 1, "name": "vm-budget", "on_violation": "deny",
 "rules": [{"action": "allow", "cidr": "127.0.0.1/32", "ports": [8096], "protocol": "tcp",
            "budget": {"egress_bytes": 4096}}]}
JSON
cat > "$root/init" <<'INIT'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /sys/fs/cgroup /sys/fs/bpf
mount -t cgroup2 none /sys/fs/cgroup
mount -t bpf bpf /sys/fs/bpf
ip link set lo up
insmod /lib/modules/inet_diag.ko && insmod /lib/modules/tcp_diag.ko
echo "VMTEST kernel $(uname -r)"
nc -l -p 8080 > /tmp/got &
nc -l -p 8082 > /tmp/got-dns &
dnsd &
sleep 1
# 127.0.0.1:8082 opens only through a learned answer for allowed.test; a
# query for denied.test never leaves.
airlock run --policy /policy.json --name vm --audit-log /tmp/audit.jsonl --log-allowed -- \
  sh -c 'echo AIRLOCK-VM-OK | nc -w 2 127.0.0.1 8080; echo AIRLOCK-VM-BAD | nc -w 2 127.0.0.1 8081; echo "denied-rc=$?";
         nslookup -type=A allowed.test 127.0.0.1; echo AIRLOCK-VM-DNS | nc -w 2 127.0.0.1 8082;
         nslookup -type=A denied.test 127.0.0.1; echo "dns-denied-rc=$?"' 2>/tmp/run.err
echo "VMTEST run-exit $?"
cat /tmp/run.err
# Containment on this kernel, as uid 0 without --keep-caps.
nc -l -p 8083 > /tmp/got-esc &
sleep 1
airlock run --policy /policy.json --name vm-contain --audit-log /tmp/contain.jsonl -- \
  sh -c 'probe fam; probe edns;
         echo $$ > /sys/fs/cgroup/cgroup.procs; echo "esc-procs-rc=$?";
         mkdir -p /tmp/cg2 && mount -t cgroup2 none /tmp/cg2; echo "esc-mount-rc=$?";
         echo AIRLOCK-VM-ESC | nc -w 2 127.0.0.1 8083; echo "esc-rc=$?"' > /tmp/contain.out 2>/tmp/contain.err
echo "VMTEST contain-exit $?"
cat /tmp/contain.out /tmp/contain.err
airlock run --policy /policy-kill.json --name vm-kill --audit-log /tmp/kill.jsonl -- \
  sh -c 'echo AIRLOCK-VM-KILL | nc -w 2 127.0.0.1 8081; sleep 30; echo not-killed' > /tmp/kill.out 2>&1
kill_rc=$?
echo "VMTEST kill-exit $kill_rc"
# World mode on this kernel: the connect to an address with no route lands
# in the recorder (sock_addr rewrite, sockops, socket storage, getpeername),
# and so does a datagram (its origin filed at egress).
airlock run --policy /world.json --name vm-world --audit-log /tmp/world-audit.jsonl -- \
  sh -c 'printf "GET /vm-world HTTP/1.0\r\nHost: example.test\r\n\r\n" | nc -w 3 203.0.113.10 80;
         probe udp 203.0.113.11 5353 VMWORLD-UDP; probe dnsa 203.0.113.53 vmworld' > /tmp/world.out 2>/tmp/world.err
echo "VMTEST world-exit $?"
# The SNI gate on this kernel: allowed.test's learned address, a ClientHello
# naming evil.test denied, one naming allowed.test spliced to the origin.
echo GATE-UP | nc -l -p 8443 > /tmp/got-gate &
sleep 1
airlock run --policy /gate.json --name vm-gate --audit-log /tmp/gate-audit.jsonl -- \
  sh -c 'nslookup -type=A allowed.test 127.0.0.1 >/dev/null; probe hello 127.0.0.1 8443 evil.test;
         probe hello 127.0.0.1 8443 allowed.test' > /tmp/gate.out 2>/tmp/gate.err
echo "VMTEST gate-exit $?"
# The HTTP gate on this kernel, plain HTTP: a request outside the rule's
# entries answered 403 by the gate, one inside them sent to the origin.
printf 'HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nHTTP-UP\n' | nc -l -p 8480 > /tmp/got-http &
sleep 1
airlock run --policy /http.json --name vm-http --audit-log /tmp/http-audit.jsonl -- \
  sh -c 'nslookup -type=A allowed.test 127.0.0.1 >/dev/null;
         printf "GET /admin HTTP/1.1\r\nHost: allowed.test:8480\r\nConnection: close\r\n\r\n" | nc -w 3 127.0.0.1 8480;
         printf "GET /pub/x HTTP/1.1\r\nHost: allowed.test:8480\r\nConnection: close\r\n\r\n" | nc -w 3 127.0.0.1 8480' \
  > /tmp/http.out 2>/tmp/http.err
echo "VMTEST http-exit $?"
# A redirect to a target of the operator's: the connect lands there, and the
# target, in a cgroup of its own, is told by SO_ORIGINAL_DST where it was
# meant to go.
mkdir -p /sys/fs/cgroup/target && sh -c 'echo $$ > /sys/fs/cgroup/target/cgroup.procs; exec probe origdst 8090' > /tmp/target-sim.out &
sleep 1
airlock run --policy /target.json --name vm-target --audit-log /tmp/target-audit.jsonl -- \
  sh -c 'echo VM-TARGET | nc -w 3 203.0.113.10 80' > /tmp/target.out 2>/tmp/target.err
echo "VMTEST target-exit $?"
# A byte budget on this kernel: a first line, then 20000 bytes that cross
# the 4096 allowed; the crossing packet never leaves (a violation), and the
# rule's next connect is refused.
# (The listener's stdin stays open: busybox nc ends at its end.)
sleep 30 | nc -l -p 8096 > /tmp/got-budget &
sleep 1
airlock run --policy /budget.json --name vm-budget --audit-log /tmp/budget-audit.jsonl -- \
  sh -c '(echo AIRLOCK-VM-BUDGET; sleep 1; dd if=/dev/zero bs=1000 count=20 2>/dev/null) | nc -w 2 127.0.0.1 8096;
         echo again | nc -w 2 127.0.0.1 8096; echo "budget-again-rc=$?"; echo "budget-got=$(wc -c < /tmp/got-budget)"' \
  > /tmp/budget.out 2>/tmp/budget.err
echo "VMTEST budget-exit $?"
sleep 1
ok=0
grep -q AIRLOCK-VM-OK /tmp/got && grep -q '"hook":"connect4"' /tmp/audit.jsonl && grep -q '"port":8081' /tmp/audit.jsonl && ok=1
# The DNS path on this kernel: the learned address carried the connect, the
# denied name was stopped at egress.
grep -q AIRLOCK-VM-DNS /tmp/got-dns && grep -q '"reason":"learned"' /tmp/audit.jsonl && \
  grep -q '"qname":"denied.test".*"reason":"dns-name"\|"reason":"dns-name".*"qname":"denied.test"' /tmp/audit.jsonl || ok=0
# No cgroup unix hooks before 6.7: airlock says so, as documented.
grep -q "no cgroup unix-socket hooks" /tmp/run.err || { echo "VMTEST no unix-hooks warning"; ok=0; }
# No bpf_send_signal from sock_addr programs before 6.16: said, and the freeze does it.
grep -q "lacks bpf_send_signal in sock_addr programs" /tmp/run.err || { echo "VMTEST no send-signal notice"; ok=0; }
# Families: vsock, packet and NETLINK_USERSOCK refused (EPERM) and recorded; rtnetlink and unix made.
for want in "FAM 40 0 1" "FAM 17 0 1" "FAM 16 2 1" "FAM 16 0 ok" "FAM 1 0 ok"; do
  grep -q "^$want\$" /tmp/contain.out || { echo "VMTEST family: want '$want'"; ok=0; }
done
for fam in vsock packet netlink; do
  grep -q "\"socket_family\":\"$fam\"" /tmp/contain.jsonl || { echo "VMTEST family $fam not recorded"; ok=0; }
done
# EDNS: the unlisted option is dropped at egress, recorded, and never reaches the resolver; a COOKIE does.
grep -q "^EDNS-BAD 1\$" /tmp/contain.out && grep -q "^EDNS-GOOD answered\$" /tmp/contain.out && \
  grep -q '"reason":"dns-edns"' /tmp/contain.jsonl || { echo "VMTEST edns"; ok=0; }
grep -aq allowed /tmp/dns.log && ! grep -aq EXFILTRATE-ME /tmp/dns.log || { echo "VMTEST edns option reached the resolver"; ok=0; }
# uid 0 stays in its cgroup: the connect after the attempts is still denied, nothing arrives.
grep -q "^esc-rc=1\$" /tmp/contain.out && grep -q '"port":8083' /tmp/contain.jsonl || { echo "VMTEST escape"; ok=0; }
! grep -q AIRLOCK-VM-ESC /tmp/got-esc || { echo "VMTEST uid 0 got out"; ok=0; }
# on_violation kill: the sandbox ends at its violation (exit status 120), the rest never runs.
[ "$kill_rc" = 120 ] && ! grep -q not-killed /tmp/kill.out || { echo "VMTEST kill"; ok=0; }
# World: the request recorded with its original destination, the recorder's answer back.
grep -q '"dst":"203.0.113.10","port":80' /tmp/world/vm-world.jsonl && grep -q '"path":"/vm-world"' /tmp/world/vm-world.jsonl && \
  grep -q '"kind":"udp","dst":"203.0.113.11","port":5353,"protocol":"udp","rule":0,"bytes_in":11' /tmp/world/vm-world.jsonl && \
  grep -q "^HTTP/1.[01] 200" /tmp/world.out && \
  grep -q '^DNSA from 203.0.113.53:53 answer 198.18.0.1$' /tmp/world.out && \
  grep -q '"kind":"dns","dst":"203.0.113.53","port":53,"protocol":"udp","bytes_in":25,"query":"vmworld","qtype":"A","rcode":"NOERROR","answer":"198.18.0.1"' /tmp/world/vm-world.jsonl || \
  { echo "VMTEST world"; cat /tmp/world.err /tmp/world.out /tmp/world/vm-world.jsonl; ok=0; }
# The gate: the fronted name closed and recorded with its reason, audited as
# a violation; the rule's name got the origin's answer, recorded as passed.
gr=/var/log/airlock/world/vm-gate.jsonl
grep -q '^HELLO evil.test closed$' /tmp/gate.out && grep -q '^HELLO allowed.test back GATE-UP$' /tmp/gate.out && \
  grep -q '"verdict":"deny","sni":"evil.test","reason":"'"'"'evil.test'"'"' is not allowed.test of rule 0"' $gr && \
  grep -q '"verdict":"pass","sni":"allowed.test"' $gr && \
  grep -q '"event":"sni-gate".*"violation":true\|"violation":true.*"event":"sni-gate"' /tmp/gate-audit.jsonl || \
  { echo "VMTEST gate"; cat /tmp/gate.err /tmp/gate.out $gr /tmp/gate-audit.jsonl; ok=0; }
# The HTTP gate: the refused request answered 403 and recorded, audited as
# a violation, never at the origin; the allowed one answered by it.
hr=/var/log/airlock/world/vm-http.jsonl
grep -q '^HTTP/1.1 403 Forbidden' /tmp/http.out && grep -q '^HTTP-UP$' /tmp/http.out && \
  grep -q 'GET /pub/x HTTP/1.1' /tmp/got-http && ! grep -q admin /tmp/got-http && \
  grep -q '"method":"GET".*"path":"/admin".*"reason":"http-deny"' $hr && \
  grep -q '"event":"http-gate".*"violation":true\|"violation":true.*"event":"http-gate"' /tmp/http-audit.jsonl || \
  { echo "VMTEST http"; cat /tmp/http.err /tmp/http.out /tmp/got-http $hr /tmp/http-audit.jsonl; ok=0; }
cat /tmp/audit.jsonl /tmp/contain.jsonl
grep -q '^ORIGDST 203.0.113.10:80$' /tmp/target-sim.out && grep -q '^TARGET-UP$' /tmp/target.out || \
  { echo "VMTEST target"; cat /tmp/target.err /tmp/target.out /tmp/target-sim.out; ok=0; }
# The budget: the first line arrived and, while the sandbox lived, nothing
# past the budget did (counted from inside, before it ends); the crossing
# recorded as a budget violation; the next connect refused. The socket its
# first nc closed, what egress refused still queued, was ended through
# sock_diag before the programs were detached, and nothing more arrived.
got=$(sed -n 's/^budget-got=//p' /tmp/budget.out)
grep -q AIRLOCK-VM-BUDGET /tmp/got-budget && [ -n "$got" ] && [ "$got" -le 4096 ] && \
  grep -q 'vm-budget: 1 TCP socket(s) of its cgroup ended' /tmp/budget.err && [ "$(wc -c < /tmp/got-budget)" -le 4096 ] && \
  grep -q '"hook":"egress".*"reason":"budget".*"violation":true' /tmp/budget-audit.jsonl && \
  grep -q '"hook":"connect4".*"reason":"budget"' /tmp/budget-audit.jsonl && grep -q '^budget-again-rc=1$' /tmp/budget.out || \
  { echo "VMTEST budget (got $got bytes)"; cat /tmp/budget.err /tmp/budget.out /tmp/budget-audit.jsonl; ok=0; }
if [ $ok = 1 ]; then echo "VMTEST PASS"; else echo "VMTEST FAIL"; fi
poweroff -f
INIT
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$work/initrd.gz"

log="$work/console.log"
timeout 600 qemu-system-x86_64 -machine q35 -accel tcg -cpu max -m 1024 -smp 1 -nographic -no-reboot \
  -kernel "$kernel" -initrd "$work/initrd.gz" -append "console=ttyS0 panic=-1 quiet" > "$log" 2>&1 || true
grep -E "VMTEST|airlock|denied-rc" "$log" || true
grep -q "VMTEST PASS" "$log" && echo "1 passed, 0 failed" && exit 0
echo "--- console ---"; tail -40 "$log"
echo "0 passed, 1 failed"
exit 1
