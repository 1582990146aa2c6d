#!/usr/bin/env python3
"""TCP connect + send, one connection per DEST MARKER pair.

  tcp_send.py [--fastopen] DEST MARKER [DEST MARKER ...]

DEST is 10.77.0.2:9000, [fd77::2]:9000 or [::ffff:10.77.0.3]:9000 (an
AF_INET6 socket to a v4-mapped address). The payload is the marker itself.
--fastopen sends the data with sendto(MSG_FASTOPEN) instead of connect().
Prints {"client":"tcp_send","results":[{dst,port,ok,errno,...}]}.
"""
import argparse

import alclient


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fastopen", action="store_true")
    ap.add_argument("items", nargs="+")
    a = ap.parse_args()
    results = []
    for dest, marker in alclient.pairs(a.items):
        r = alclient.tcp_send(dest, marker.encode(), fastopen=a.fastopen)
        r["marker"] = marker
        results.append(r)
    alclient.emit({"client": "tcp_send", "results": results})


if __name__ == "__main__":
    main()
