#!/usr/bin/env python3
"""A TCP echo server on [::]:PORT (v4 and v6): sends every connection back
what it reads, and shuts down its side when the peer has. Prints "serving"
when it listens, then a JSON line per connection it ended:
{"peer":..,"bytes":N}.

  echo_server.py PORT
"""
import json
import socket
import sys
import threading


def serve(c, peer):
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
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    s.bind(("::", int(sys.argv[1])))
    s.listen(64)
    print("serving", flush=True)
    while True:
        c, peer = s.accept()
        threading.Thread(target=serve, args=(c, peer), daemon=True).start()


if __name__ == "__main__":
    main()
