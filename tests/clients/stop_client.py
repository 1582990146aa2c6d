#!/usr/bin/env python3
"""One violating connect, then the instructions a stopped task must not run.

  stop_client.py --dir D --violation DEST --marker M --allowed DEST2 --allowed-marker M2

1. writes D/pid, waits for D/go;
2. writes D/attempt (CLOCK_MONOTONIC ns, just before the call), then
   connects to DEST and sends M if the connect succeeds;
3. at once writes "ran" to D/progress (created empty before), then the
   connect's result to D/result: a task the kernel stopped (SIGSTOP) or
   killed (SIGKILL) in that connect never gets there until it is resumed;
4. waits for D/thawed, sends M2 over TCP to DEST2, writes D/after.
"""
import argparse
import os
import socket
import time

import alclient


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--violation", required=True)
    ap.add_argument("--marker", required=True)
    ap.add_argument("--allowed", required=True)
    ap.add_argument("--allowed-marker", required=True)
    a = ap.parse_args()
    d = a.dir
    alclient.write_json_atomic(os.path.join(d, "pid"), {"pid": os.getpid()})
    if not alclient.wait_for_file(os.path.join(d, "go"), 20.0):
        return 2
    # Opened (empty) beforehand: the first thing after the call is one
    # write(2) to it, a few microseconds, well before any freeze can land.
    progress = os.open(os.path.join(d, "progress"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    fam, host, port = alclient.parse_dest(a.violation)
    s = socket.socket(fam, socket.SOCK_STREAM)
    alclient.write_json_atomic(os.path.join(d, "attempt"), {"ns": time.monotonic_ns()})
    try:
        s.connect(alclient.sockaddr(fam, host, port))
        err = None
    except OSError as e:
        err = e
    os.write(progress, b"ran\n")
    r = {"dst": host, "port": port, "ok": err is None, "errno": alclient.errname(err) if err else None}
    if err is None:
        s.sendall(a.marker.encode())
    s.close()
    alclient.write_json_atomic(os.path.join(d, "result"), dict(r, ns=time.monotonic_ns()))
    if not alclient.wait_for_file(os.path.join(d, "thawed"), 30.0):
        return 3
    after = alclient.tcp_send(a.allowed, a.allowed_marker.encode())
    alclient.write_json_atomic(os.path.join(d, "after"), after)
    alclient.emit({"client": "stop_client", "violation": r, "after": after})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
