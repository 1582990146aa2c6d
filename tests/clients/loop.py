#!/usr/bin/env python3
"""A client that keeps trying an allowed and a denied destination.

  loop.py --proto tcp|udp --allowed DEST --denied DEST --prefix P
          --progress FILE [--stop FILE] [--max N] [--seconds T] [--denied-every K]

Iteration i sends marker "P-ALLOW-i-" to the allowed destination (TCP:
connect, send, close; UDP: sendto) and, every K-th iteration, "P-DENY-i-" to
the denied one. After every iteration it replaces FILE with the running
totals. It stops when the stop file appears, after N iterations or after T
seconds, whichever comes first, and prints the totals:
{"client":"loop","iterations":N,"allowed":{"ok","fail","errors"},"denied":{..}}.
"""
import argparse
import os
import socket
import time

import alclient


def attempt(proto, dest, payload, udp_socks):
    fam, host, port = alclient.parse_dest(dest)
    if proto == "tcp":
        r = alclient.tcp_send(dest, payload, timeout=2.0)
        return r["ok"], r.get("errno")
    s = udp_socks.get(fam)
    if s is None:
        s = udp_socks[fam] = socket.socket(fam, socket.SOCK_DGRAM)
    try:
        s.sendto(payload, alclient.sockaddr(fam, host, port))
        return True, None
    except OSError as e:
        return False, alclient.errname(e)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proto", choices=["tcp", "udp"], required=True)
    ap.add_argument("--allowed", required=True)
    ap.add_argument("--denied", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--progress", required=True)
    ap.add_argument("--stop", default="")
    ap.add_argument("--max", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--denied-every", type=int, default=1)
    ap.add_argument("--interval", type=float, default=0.0, help="sleep between iterations")
    a = ap.parse_args()
    totals = {"allowed": {"ok": 0, "fail": 0, "errors": {}}, "denied": {"ok": 0, "fail": 0, "errors": {}}}
    udp_socks = {}
    deadline = time.monotonic() + a.seconds
    i = 0
    stopped_by = "max"
    while i < a.max:
        if time.monotonic() >= deadline:
            stopped_by = "time"
            break
        if a.stop and os.path.exists(a.stop):
            stopped_by = "stop"
            break
        plan = [("allowed", a.allowed, "%s-ALLOW-%d-" % (a.prefix, i))]
        if i % a.denied_every == 0:
            plan.append(("denied", a.denied, "%s-DENY-%d-" % (a.prefix, i)))
        for which, dest, marker in plan:
            ok, err = attempt(a.proto, dest, marker.encode(), udp_socks)
            t = totals[which]
            if ok:
                t["ok"] += 1
            else:
                t["fail"] += 1
                t["errors"][err] = t["errors"].get(err, 0) + 1
        i += 1
        alclient.write_json_atomic(a.progress, dict(totals, iterations=i))
        if a.interval:
            time.sleep(a.interval)
    out = dict(totals, client="loop", iterations=i, stopped_by=stopped_by)
    alclient.write_json_atomic(a.progress, out)
    alclient.emit(out)


if __name__ == "__main__":
    main()
