#!/usr/bin/env python3
"""The HTTP gate benchmark's client, inside `airlock run`: in each round,
alternating which goes first, the same exchanges go directly to the origin
(127.0.0.1:DIRECT, its certificate trusted from ORIGIN_CERT) and through
the gate (https://allowed.test:GATED, the sandbox's bundle trusted):

  - latency: one kept-alive connection, REQUESTS GETs of 2 bytes one
    after the other; microseconds per request;
  - download: one GET of BYTES bytes, read in 1 MiB pieces; MB/s.

Prints one JSON line per round.

  gate_bench.py ORIGIN_CERT DIRECT GATED ROUNDS REQUESTS BYTES
"""
import http.client
import json
import ssl
import sys
import time


def connect(way, cert, direct, gated):
    if way == "direct":
        # The origin's certificate names 127.0.0.1 too.
        return http.client.HTTPSConnection("127.0.0.1", direct, context=ssl.create_default_context(cafile=cert))
    return http.client.HTTPSConnection("allowed.test", gated, context=ssl.create_default_context())


def latency(c, n):
    t0 = time.perf_counter()
    for _ in range(n):
        c.request("GET", "/small")
        r = c.getresponse()
        r.read()
        if r.status != 200:
            raise SystemExit(f"GET /small: {r.status}")
    return (time.perf_counter() - t0) / n * 1e6


def download(c, n):
    t0 = time.perf_counter()
    c.request("GET", f"/big?n={n}")
    r = c.getresponse()
    got = 0
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        got += len(b)
    if r.status != 200 or got != n:
        raise SystemExit(f"GET /big: {r.status}, {got} of {n} bytes")
    return n / (time.perf_counter() - t0) / 1e6


def main():
    cert, direct, gated, rounds, requests, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    for k in range(rounds):
        row = {"round": k}
        ways = ["direct", "gate"] if k % 2 == 0 else ["gate", "direct"]
        for way in ways:
            c = connect(way, cert, direct, gated)
            latency(c, 20)  # the handshake and the first requests, not counted
            row[way + "_request_us"] = round(latency(c, requests), 1)
            row[way + "_download_mbps"] = round(download(c, size), 1)
            c.close()
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
