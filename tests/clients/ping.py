#!/usr/bin/env python3
"""ICMP "ping" sockets (SOCK_DGRAM + IPPROTO_ICMP/ICMPV6).

  ping.py [--family 4|6] [DEST MARKER ...]

Creates the ping socket (net.ipv4.ping_group_range must include our gid),
then sends one echo request per DEST (an address, no port) with MARKER as
payload and waits up to 1 s for its reply. Without an ICMP rule, socket()
must fail with EPERM; should it succeed, the echoes are sent anyway so that a
failed denial shows at the sink.
Prints {"client":"ping","created":bool,"errno":..,"results":[{dst,ok,errno,reply}]}.
"""
import argparse
import select
import socket
import struct
import time

import alclient


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", choices=["4", "6"], default="4")
    ap.add_argument("items", nargs="*")
    a = ap.parse_args()
    v6 = a.family == "6"
    fam = socket.AF_INET6 if v6 else socket.AF_INET
    proto = socket.IPPROTO_ICMPV6 if v6 else socket.IPPROTO_ICMP
    out = {"client": "ping", "family": "ipv6" if v6 else "ipv4", "results": []}
    try:
        s = socket.socket(fam, socket.SOCK_DGRAM, proto)
        out.update(created=True, errno=None)
    except OSError as e:
        out.update(created=False, errno=alclient.errname(e))
        alclient.emit(out)
        return
    for seq, (host, marker) in enumerate(alclient.pairs(a.items), start=1):
        r = {"dst": host, "marker": marker, "proto": "icmp"}
        # type, code, checksum (the kernel computes it), id (the kernel sets it), seq
        pkt = struct.pack("!BBHHH", 128 if v6 else 8, 0, 0, 0, seq) + marker.encode()
        try:
            s.sendto(pkt, (host, 0, 0, 0) if v6 else (host, 0))
            r.update(ok=True, errno=None)
        except OSError as e:
            r.update(ok=False, errno=alclient.errname(e), reply=False)
            out["results"].append(r)
            continue
        reply = False
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and not reply:
            rd, _, _ = select.select([s], [], [], max(0.0, deadline - time.monotonic()))
            if not rd:
                break
            try:
                data, _ = s.recvfrom(65536)
            except OSError:
                break
            if marker.encode() in data and struct.unpack("!H", data[6:8])[0] == seq:
                reply = True
        r["reply"] = reply
        out["results"].append(r)
    s.close()
    alclient.emit(out)


if __name__ == "__main__":
    main()
