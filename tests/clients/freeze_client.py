#!/usr/bin/env python3
"""Two processes, one violation, then allowed traffic: for freeze and kill.

  freeze_client.py --dir D --allowed DEST --violation DEST --prefix P
                   [--allowed-tcp DEST] [--post N] [--seconds T] [--uring PATH]

1. forks a helper process; both processes keep bumping a heartbeat counter
   (D/hb.main by a thread of the main process, D/hb.child by the helper)
   every 5 ms, and D/pids.json names them;
2. waits for D/go;
3. sends "P-PRE-" to the allowed destination (must arrive), then the
   violation "P-VIOL-" (UDP sendto), then at once N datagrams "P-POST-k-" to
   the allowed destination (after the violation, none may arrive);
   writes D/phase1.json; with --uring, the violation and the N datagrams
   are one io_uring batch (uring_connect batch) submitted by one syscall, so
   they all reach the kernel before any freezer can act;
4. waits for D/thawed, sends "P-AFTER-" (UDP) and, with --allowed-tcp,
   "P-AFTERTCP-" over TCP; writes D/phase2.json;
5. lingers until killed, or exits 3 after T seconds in all.
"""
import argparse
import os
import socket
import threading
import time

import alclient


def heartbeat(path, stop_at):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    n = 0
    while time.monotonic() < stop_at:
        n += 1
        os.pwrite(fd, b"%012d\n" % n, 0)
        time.sleep(0.005)
    os.close(fd)


def udp(dest, payload):
    fam, host, port = alclient.parse_dest(dest)
    r = {"dst": host, "port": port, "marker": payload.decode()}
    try:
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.sendto(payload, alclient.sockaddr(fam, host, port))
        s.close()
        r.update(ok=True, errno=None)
    except OSError as e:
        r.update(ok=False, errno=alclient.errname(e))
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--allowed", required=True)
    ap.add_argument("--allowed-tcp", default="")
    ap.add_argument("--violation", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--post", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=25.0)
    ap.add_argument("--uring", default="")
    a = ap.parse_args()
    stop_at = time.monotonic() + a.seconds
    d = a.dir

    child = os.fork()
    if child == 0:
        try:
            heartbeat(os.path.join(d, "hb.child"), stop_at)
        finally:
            os._exit(0)
    t = threading.Thread(target=heartbeat, args=(os.path.join(d, "hb.main"), stop_at), daemon=True)
    t.start()
    alclient.write_json_atomic(os.path.join(d, "pids.json"), {"main": os.getpid(), "child": child})

    if not alclient.wait_for_file(os.path.join(d, "go"), 10.0):
        alclient.emit({"client": "freeze_client", "error": "no go file"})
        return 2
    pre = udp(a.allowed, ("%s-PRE-" % a.prefix).encode())
    if a.uring:
        import json
        import subprocess
        _, vh, vp = alclient.parse_dest(a.violation)
        _, ah, ap_ = alclient.parse_dest(a.allowed)
        argv = [a.uring, "batch", vh, str(vp), "%s-VIOL-" % a.prefix]
        for k in range(a.post):
            argv += [ah, str(ap_), "%s-POST-%d-" % (a.prefix, k)]
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            res = json.loads(p.stdout.strip().splitlines()[-1])["results"]
        except (ValueError, IndexError, KeyError):
            res = [{"ok": False, "errno": "no-output", "stdout": p.stdout, "stderr": p.stderr}]
        viol, post = res[0], res[1:]
    else:
        viol = udp(a.violation, ("%s-VIOL-" % a.prefix).encode())
        post = [udp(a.allowed, ("%s-POST-%d-" % (a.prefix, k)).encode()) for k in range(a.post)]
    phase1 = {"pre": pre, "violation": viol, "post": post}
    alclient.write_json_atomic(os.path.join(d, "phase1.json"), phase1)
    alclient.emit(dict(phase1, client="freeze_client", phase=1))

    if not alclient.wait_for_file(os.path.join(d, "thawed"), max(0.0, stop_at - time.monotonic())):
        return 3
    phase2 = {"after": udp(a.allowed, ("%s-AFTER-" % a.prefix).encode())}
    if a.allowed_tcp:
        r = alclient.tcp_send(a.allowed_tcp, ("%s-AFTERTCP-" % a.prefix).encode())
        phase2["after_tcp"] = r
    alclient.write_json_atomic(os.path.join(d, "phase2.json"), phase2)
    alclient.emit(dict(phase2, client="freeze_client", phase=2))
    while time.monotonic() < stop_at:
        time.sleep(0.01)
    return 3


if __name__ == "__main__":
    raise SystemExit(main())
