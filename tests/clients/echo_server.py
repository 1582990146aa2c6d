#!/usr/bin/env python3
"""A TCP echo server on HOST:PORT (default [::], v4 and v6): sends every
connection back what it reads, and shuts down its side when the peer has.
Prints "serving" when it listens, then a JSON line per connection: one
{"accepted":peer} as it is accepted, one {"peer":..,"bytes":N} as it ends.

  echo_server.py PORT [HOST]
"""
import json
import socket
import sys
import threading


def serve(c, peer):
    # Urgent data (none comes through a proxy that passes the byte on as
    # data) is read in its place too.
    c.setsockopt(socket.SOL_SOCKET, socket.SO_OOBINLINE, 1)
    n = 0
    try:
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            c.sendall(b)
            n += len(b)
        c.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    c.close()
    print(json.dumps({"peer": peer[0], "bytes": n}), flush=True)


def main():
    host = sys.argv[2] if len(sys.argv) > 2 else "::"
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if ":" in host:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind((host, int(sys.argv[1])))
    s.listen(64)
    print("serving", flush=True)
    while True:
        c, peer = s.accept()
        print(json.dumps({"accepted": peer[0]}), flush=True)
        threading.Thread(target=serve, args=(c, peer), daemon=True).start()


if __name__ == "__main__":
    main()
