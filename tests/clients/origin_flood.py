#!/usr/bin/env python3
"""Many datagrams to DEST, each from a socket of its own on another loopback
address: under a redirect, each files an origin of its own.

  origin_flood.py N DEST

Prints {"client":"origin_flood","sent":N,"errors":M}.
"""
import socket
import sys

import alclient


def main():
    n = int(sys.argv[1])
    fam, host, port = alclient.parse_dest(sys.argv[2])
    sent = errors = 0
    for i in range(n):
        s = socket.socket(fam, socket.SOCK_DGRAM)
        try:
            s.bind(("127.0.%d.%d" % (i // 250 % 250, 2 + i % 250), 0))
            s.sendto(b"x", alclient.sockaddr(fam, host, port))
            sent += 1
        except OSError:
            errors += 1
        finally:
            s.close()
    alclient.emit({"client": "origin_flood", "sent": sent, "errors": errors})


if __name__ == "__main__":
    main()
