#!/usr/bin/env python3
"""An HTTP request per DEST MARKER pair, and what the socket says of its peer.

  world_client.py DEST MARKER [DEST MARKER ...]

DEST is 10.77.0.3:9001, [fd77::3]:9002 or [::ffff:10.77.0.3]:9003. Sends
"GET /world/MARKER HTTP/1.1" with Host: DEST and Connection: close, reads
the answer to its end. Prints {"client":"world_client","results":[{dst,
port,ok,errno,peer,peer_port,status,body}]}: peer is what getpeername(2)
returned after connect, status the answer's status code.
"""
import socket

import alclient


def request(dest, marker, timeout=5.0):
    fam, host, port = alclient.parse_dest(dest)
    r = {"dst": host, "port": port, "proto": "tcp", "marker": marker}
    try:
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(alclient.sockaddr(fam, host, port))
    except OSError as e:
        r.update(ok=False, stage="connect", errno=alclient.errname(e))
        return r
    try:
        peer = s.getpeername()
        r.update(peer=peer[0], peer_port=peer[1])
        hostname = "[%s]" % host if fam == socket.AF_INET6 else host
        req = "GET /world/%s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n" % (marker, hostname, port)
        s.sendall(req.encode())
        status, body = alclient.http_answer(s)
        r.update(ok=True, errno=None, status=status, body=body.decode("utf-8", "replace"))
    except OSError as e:
        r.update(ok=False, stage="request", errno=alclient.errname(e))
    finally:
        s.close()
    return r


def main():
    import sys
    results = [request(d, m) for d, m in alclient.pairs(sys.argv[1:])]
    alclient.emit({"client": "world_client", "results": results})


if __name__ == "__main__":
    main()
