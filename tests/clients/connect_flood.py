#!/usr/bin/env python3
"""Denied-connect flood, then (optionally) one more connect and a progress file.

  connect_flood.py DEST MARKER COUNT [--seconds S] [--go FILE] [--until FILE]
                   [--then DEST2 MARKER2 --progress P]

COUNT TCP connects to DEST on one socket (a connect the kernel refuses
leaves the socket unconnected); one that succeeds sends MARKER and is
counted as "ok". --seconds S: go on until S seconds have passed as well;
--until FILE: go on until FILE exists (COUNT is then a minimum).
Writes {"client":"connect_flood","attempts":..,"eperm":..,"ok":..,"other":..}.
--then: after the flood, one connect to DEST2 (MARKER2 sent if it
succeeds), then P is written at once: a task stopped in that connect never
writes it. --go FILE: wait for FILE before exiting (the test reads the
sandbox's counters while it still exists).
"""
import argparse
import errno
import os
import socket
import time

import alclient


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dest")
    ap.add_argument("marker")
    ap.add_argument("count", type=int)
    ap.add_argument("--seconds", type=float, default=0.0)
    ap.add_argument("--go", default="")
    ap.add_argument("--until", default="")
    ap.add_argument("--then", nargs=2, default=None)
    ap.add_argument("--progress", default="")
    a = ap.parse_args()
    fam, host, port = alclient.parse_dest(a.dest)
    addr = alclient.sockaddr(fam, host, port)
    s = socket.socket(fam, socket.SOCK_STREAM)
    n = eperm = ok = other = 0
    end = time.monotonic() + a.seconds
    while n < a.count or (a.seconds and time.monotonic() < end) or (a.until and not os.path.exists(a.until)):
        n += 1
        try:
            s.connect(addr)
            s.sendall(a.marker.encode())
            s.close()
            ok += 1
            s = socket.socket(fam, socket.SOCK_STREAM)
        except OSError as e:
            if e.errno == errno.EPERM:
                eperm += 1
            else:
                other += 1
                s.close()
                s = socket.socket(fam, socket.SOCK_STREAM)
    out = {"client": "connect_flood", "attempts": n, "eperm": eperm, "ok": ok, "other": other}
    if a.then:
        r = alclient.tcp_send(a.then[0], a.then[1].encode())
        # The next instruction after the violating call: never reached by
        # a task the kernel stopped in that call.
        if a.progress:
            alclient.write_json_atomic(a.progress, r)
        out["then"] = r
    alclient.emit(out)
    if a.go:
        alclient.wait_for_file(a.go, 60.0)


if __name__ == "__main__":
    main()
