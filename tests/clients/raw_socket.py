#!/usr/bin/env python3
"""Raw sockets: every attempt must fail at socket() with EPERM.

  raw_socket.py DEST4 DEST6 MARKER

Tries AF_INET SOCK_RAW/IPPROTO_UDP, AF_INET SOCK_RAW/IPPROTO_RAW (IP_HDRINCL),
AF_INET SOCK_RAW/IPPROTO_ICMP and AF_INET6 SOCK_RAW/IPPROTO_UDP. Should one be
created anyway, it is used at once to send a hand-made UDP datagram carrying
MARKER to DEST4 (10.77.0.3:PORT) or DEST6, so a failed denial shows at the sink.
Run with airlock --keep-caps: without CAP_NET_RAW the capability check, not
airlock, would refuse the socket.
Prints {"client":"raw_socket","results":[{kind,created,errno,sent,send_errno}]}.
"""
import socket
import struct
import sys

import alclient


def udp_header(sport, dport, payload):
    return struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload


def ipv4_header(src, dst, payload_len):
    return struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + payload_len, 0, 0, 64, socket.IPPROTO_UDP, 0,
                       socket.inet_aton(src), socket.inet_aton(dst))


def main():
    _, host4, port4 = alclient.parse_dest(sys.argv[1])
    _, host6, port6 = alclient.parse_dest(sys.argv[2])
    marker = sys.argv[3].encode()
    attempts = [
        ("inet-raw-udp", socket.AF_INET, socket.IPPROTO_UDP),
        ("inet-raw-raw", socket.AF_INET, socket.IPPROTO_RAW),
        ("inet-raw-icmp", socket.AF_INET, socket.IPPROTO_ICMP),
        ("inet6-raw-udp", socket.AF_INET6, socket.IPPROTO_UDP),
    ]
    results = []
    for kind, fam, proto in attempts:
        r = {"kind": kind}
        try:
            s = socket.socket(fam, socket.SOCK_RAW, proto)
        except OSError as e:
            r.update(created=False, errno=alclient.errname(e))
            results.append(r)
            continue
        r.update(created=True, errno=None)
        try:
            if kind == "inet-raw-udp":
                n = s.sendto(udp_header(40000, port4, marker), (host4, 0))
            elif kind == "inet-raw-raw":
                udp = udp_header(40001, port4, marker)
                n = s.sendto(ipv4_header("10.77.0.1", host4, len(udp)) + udp, (host4, 0))
            elif kind == "inet-raw-icmp":
                n = s.sendto(struct.pack("!BBHHH", 8, 0, 0, 1, 1) + marker, (host4, 0))
            else:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_CHECKSUM, 6)
                n = s.sendto(udp_header(40002, port6, marker), (host6, 0, 0, 0))
            r.update(sent=n, send_errno=None)
        except OSError as e:
            r.update(sent=None, send_errno=alclient.errname(e))
        s.close()
        results.append(r)
    alclient.emit({"client": "raw_socket", "results": results})


if __name__ == "__main__":
    main()
