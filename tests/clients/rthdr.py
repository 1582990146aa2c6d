#!/usr/bin/env python3
"""IPv6 routing header (type 4, segment routing) on a UDP socket.

  rthdr.py [--cmsg] --via FIRST_SEGMENT DEST MARKER

The sock_addr hooks see DEST (allowed); the kernel writes DEST into
segments[0] and sends the packet to FIRST_SEGMENT (forbidden). The header is
set with setsockopt(IPV6_RTHDR), or with --cmsg as ancillary data.
Prints {"client":"rthdr","results":[{dst,port,via,ok,errno,stage}]}.
"""
import argparse
import socket
import struct

import alclient

IPV6_RTHDR = getattr(socket, "IPV6_RTHDR", 57)
IPV6_SRCRT_TYPE_4 = 4


def srh(final, via):
    # nexthdr (kernel fills), hdrlen in 8-octet units beyond the first 8,
    # type 4, segments_left 1, last_entry 1, flags 0, tag 0; segments[0] is
    # the final destination (overwritten by the kernel), segments[1] the
    # first one the packet goes to.
    segs = socket.inet_pton(socket.AF_INET6, final) + socket.inet_pton(socket.AF_INET6, via)
    return struct.pack("!BBBBBBH", 0, len(segs) // 8, IPV6_SRCRT_TYPE_4, 1, 1, 0, 0) + segs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--via", required=True)
    ap.add_argument("--cmsg", action="store_true")
    ap.add_argument("dest")
    ap.add_argument("marker")
    a = ap.parse_args()
    _, host, port = alclient.parse_dest(a.dest)
    hdr = srh(host, a.via)
    r = {"dst": host, "port": port, "via": a.via, "proto": "udp", "marker": a.marker, "cmsg": a.cmsg}
    stage = "socket"
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        if a.cmsg:
            stage = "sendmsg"
            s.sendmsg([a.marker.encode()], [(socket.IPPROTO_IPV6, IPV6_RTHDR, hdr)], 0, (host, port, 0, 0))
        else:
            stage = "setsockopt"
            s.setsockopt(socket.IPPROTO_IPV6, IPV6_RTHDR, hdr)
            stage = "sendto"
            s.sendto(a.marker.encode(), (host, port, 0, 0))
        r.update(ok=True, errno=None, stage=stage)
    except OSError as e:
        r.update(ok=False, errno=alclient.errname(e), stage=stage)
    alclient.emit({"client": "rthdr", "results": [r]})


if __name__ == "__main__":
    main()
