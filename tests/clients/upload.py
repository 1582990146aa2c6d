#!/usr/bin/env python3
"""Uploads: each DEST MARKER BYTES triple is one TCP connection sending
MARKER and then BYTES bytes of 'x', shutting down its side and waiting
for the sink to close (all of it arrived), at most TIMEOUT seconds of
silence (default 5).

  upload.py [--timeout S] DEST MARKER BYTES [DEST MARKER BYTES ...]

Prints {"client":"upload","results":[{dst,port,ok,errno,stage,bytes}]}:
bytes is the payload's size, marker included.
"""
import argparse

import alclient


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--timeout", type=float, default=5.0)
    ap.add_argument("items", nargs="+")
    a = ap.parse_args()
    if len(a.items) % 3:
        raise SystemExit("arguments come in DEST MARKER BYTES triples")
    results = []
    for i in range(0, len(a.items), 3):
        dest, marker, n = a.items[i], a.items[i + 1], int(a.items[i + 2])
        payload = marker.encode() + b"x" * n
        r = alclient.tcp_send(dest, payload, timeout=a.timeout)
        r.update(marker=marker, bytes=len(payload))
        results.append(r)
    alclient.emit({"client": "upload", "results": results})


if __name__ == "__main__":
    main()
