#!/usr/bin/env python3
"""Sends to a destination through a device named by the socket, not by the
route: the way a packet for a loopback address leaves through another
device. One attempt per MODE DEST MARKER triple.

  bound_send.py IFNAME MODE DEST MARKER [MODE DEST MARKER ...]

  udp-bind     UDP sendto(DEST) on a socket with SO_BINDTODEVICE IFNAME
  udp-ucast    UDP sendto(DEST) on a socket with IP_UNICAST_IF (IFNAME's index)
  tcp-bind     TCP with SO_BINDTODEVICE IFNAME: sendto(MSG_FASTOPEN), the
               marker in the SYN
The payload is the marker. Prints {"client":"bound_send","results":[...]}.
"""
import socket
import struct
import sys

import alclient

IP_UNICAST_IF = 50


def one(ifname, mode, dest, marker):
    fam, host, port = alclient.parse_dest(dest)
    addr = alclient.sockaddr(fam, host, port)
    r = {"mode": mode, "dst": host, "port": port, "marker": marker}
    kind = socket.SOCK_STREAM if mode.startswith("tcp") else socket.SOCK_DGRAM
    s = socket.socket(fam, kind)
    s.settimeout(2.0)
    stage = "setsockopt"
    try:
        if mode == "udp-ucast":
            idx = socket.if_nametoindex(ifname)
            s.setsockopt(socket.IPPROTO_IP, IP_UNICAST_IF, struct.pack("!I", idx))
        else:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, ifname.encode())
        stage = "send"
        if kind == socket.SOCK_DGRAM:
            s.sendto(marker.encode(), addr)
        else:
            s.sendto(marker.encode(), socket.MSG_FASTOPEN, addr)
        r.update(ok=True, errno=None, stage=stage)
    except OSError as e:
        r.update(ok=False, errno=alclient.errname(e), stage=stage)
    finally:
        s.close()
    return r


def main():
    ifname = sys.argv[1]
    items = sys.argv[2:]
    results = [one(ifname, items[i], items[i + 1], items[i + 2]) for i in range(0, len(items), 3)]
    alclient.emit({"client": "bound_send", "results": results})


if __name__ == "__main__":
    main()
