#!/usr/bin/env python3
"""DNS timings from inside (or outside) a sandbox, through the system resolver.

  dns_bench.py N SERVER_IP PORT

For i < N: getaddrinfo("b<i>-<salt>.allowed.test") and, at once, a TCP connect
to the first address on PORT (the first-connect check); getaddrinfo of
"d<i>-<salt>.denied.test", which the sandbox's policy does not allow.
Prints one JSON line with every timing in microseconds.
"""
import json
import os
import socket
import sys
import time


def main():
    n, server, port = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    salt = os.urandom(3).hex()
    allowed, denied, connect_ok, resolved = [], [], 0, 0
    for i in range(n):
        t = time.perf_counter()
        try:
            infos = socket.getaddrinfo(f"b{i}-{salt}.allowed.test", port, socket.AF_INET, socket.SOCK_STREAM)
            resolved += 1
        except socket.gaierror:
            infos = []
        allowed.append((time.perf_counter() - t) * 1e6)
        if infos:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(2)
            try:
                s.connect(infos[0][4])
                connect_ok += 1
            except OSError:
                pass
            finally:
                s.close()
        t = time.perf_counter()
        try:
            socket.getaddrinfo(f"d{i}-{salt}.denied.test", port, socket.AF_INET, socket.SOCK_STREAM)
            ok = True
        except socket.gaierror:
            ok = False
        denied.append((time.perf_counter() - t) * 1e6)
        denied[-1] = (denied[-1], ok)
    print(json.dumps({"n": n, "resolved": resolved, "connect_ok": connect_ok, "allowed_us": allowed,
                      "denied_us": [d[0] for d in denied], "denied_resolved": sum(d[1] for d in denied)}))


if __name__ == "__main__":
    main()
