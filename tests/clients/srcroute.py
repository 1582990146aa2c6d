#!/usr/bin/env python3
"""IPv4 loose source route: the syscall names one address, the wire another.

  srcroute.py [--strict] [--proto udp|tcp] --via FIRST_HOP DEST MARKER

Sets IP_OPTIONS to an LSRR (or SSRR with --strict) option whose route is
FIRST_HOP then DEST. The sock_addr hooks see DEST (allowed); the packet that
leaves is addressed to FIRST_HOP (forbidden) and carries DEST in the option.
Prints {"client":"srcroute","results":[{dst,port,via,ok,errno,stage}]}.
"""
import argparse
import socket

import alclient

IPOPT_LSRR = 0x83
IPOPT_SSRR = 0x89


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--via", required=True)
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--proto", choices=["udp", "tcp"], default="udp")
    ap.add_argument("dest")
    ap.add_argument("marker")
    a = ap.parse_args()
    _, host, port = alclient.parse_dest(a.dest)
    # type, length 7, pointer 4, one address; the kernel takes the first
    # address as the next hop and writes DEST into the slot. EOL pads to 8.
    opt = bytes([IPOPT_SSRR if a.strict else IPOPT_LSRR, 7, 4]) + socket.inet_aton(a.via) + b"\x00"
    r = {"dst": host, "port": port, "via": a.via, "proto": a.proto, "marker": a.marker}
    stage = "socket"
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM if a.proto == "udp" else socket.SOCK_STREAM)
        s.settimeout(3)
        stage = "setsockopt"
        s.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, opt)
        if a.proto == "udp":
            stage = "sendto"
            s.sendto(a.marker.encode(), (host, port))
        else:
            stage = "connect"
            s.connect((host, port))
            stage = "send"
            s.sendall(a.marker.encode())
        r.update(ok=True, errno=None, stage=stage)
    except OSError as e:
        r.update(ok=False, errno=alclient.errname(e), stage=stage)
    alclient.emit({"client": "srcroute", "results": [r]})


if __name__ == "__main__":
    main()
