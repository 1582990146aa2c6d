#!/usr/bin/env python3
"""A connected UDP socket (with --tcp, a TCP connection) that outlives a
policy change.

  udp_connected_wait.py [--tcp] --dir D --prefix P DEST

connect(DEST), send "P-BEFORE-", write D/connected.json, wait for D/go
(the test reloads the policy meanwhile), then send "P-AFTER-" on the same
socket with plain send(): no sock_addr hook runs for it, only cgroup_skb
egress can stop it. A TCP connection is then closed at once, what egress
refused still in its send queue.
Prints {"client":"udp_connected_wait","connect":..,"before":..,"after":..}.
"""
import argparse
import os
import socket

import alclient


def send(s, payload):
    try:
        if s.type == socket.SOCK_STREAM:
            s.sendall(payload)
        else:
            s.send(payload)
        return {"ok": True, "errno": None, "marker": payload.decode()}
    except OSError as e:
        return {"ok": False, "errno": alclient.errname(e), "marker": payload.decode()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tcp", action="store_true")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("dest")
    a = ap.parse_args()
    fam, host, port = alclient.parse_dest(a.dest)
    out = {"client": "udp_connected_wait", "dst": host, "port": port}
    s = socket.socket(fam, socket.SOCK_STREAM if a.tcp else socket.SOCK_DGRAM)
    s.settimeout(5.0)
    try:
        s.connect(alclient.sockaddr(fam, host, port))
        out["connect"] = {"ok": True, "errno": None}
    except OSError as e:
        out["connect"] = {"ok": False, "errno": alclient.errname(e)}
        alclient.emit(out)
        return
    out["before"] = send(s, ("%s-BEFORE-" % a.prefix).encode())
    alclient.write_json_atomic(os.path.join(a.dir, "connected.json"), out)
    if not alclient.wait_for_file(os.path.join(a.dir, "go"), 15.0):
        out["error"] = "no go file"
        alclient.emit(out)
        return
    out["after"] = send(s, ("%s-AFTER-" % a.prefix).encode())
    s.close()
    alclient.emit(out)


if __name__ == "__main__":
    main()
