#!/usr/bin/env python3
"""One datagram and its answer: sends MARKER to DEST and waits (at most 5 s)
for a datagram back.

  udp_exchange.py DEST MARKER

Prints {"client":"udp_exchange","udp":1,"dst","port","marker","ok","errno",
"from","port_from","data"}: from and port_from are where the answer said
it came from (recvfrom), data its payload.
"""
import socket
import sys

import alclient


def main():
    dest, marker = sys.argv[1], sys.argv[2]
    fam, host, port = alclient.parse_dest(dest)
    r = {"client": "udp_exchange", "udp": 1, "dst": host, "port": port, "marker": marker}
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.settimeout(5.0)
    try:
        s.sendto(marker.encode(), alclient.sockaddr(fam, host, port))
        data, addr = s.recvfrom(4096)
        r.update(ok=True, errno=None, data=data.decode("utf-8", "replace"))
        r["from"], r["port_from"] = addr[0], addr[1]
    except OSError as e:
        r.update(ok=False, errno=alclient.errname(e))
    finally:
        s.close()
    alclient.emit(r)


if __name__ == "__main__":
    main()
