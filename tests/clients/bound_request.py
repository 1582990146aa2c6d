#!/usr/bin/env python3
"""An HTTP/1.0 GET /MARKER from a chosen source port (SO_REUSEADDR, bound on
0.0.0.0:SPORT), its answer read to its end (the server closes first).

  bound_request.py SPORT DEST MARKER

Prints {"client":"bound_request","bound":SPORT,"dst","port","marker","ok",
"errno","body"}: body is what follows the answer's head.
"""
import socket
import sys

import alclient


def main():
    sport, dest, marker = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    fam, host, port = alclient.parse_dest(dest)
    r = {"client": "bound_request", "bound": sport, "dst": host, "port": port, "marker": marker}
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(5.0)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("::" if fam == socket.AF_INET6 else "0.0.0.0", sport))
        s.connect(alclient.sockaddr(fam, host, port))
        s.sendall(("GET /%s HTTP/1.0\r\n\r\n" % marker).encode())
        _, body = alclient.http_answer(s)
        r.update(ok=True, errno=None, body=body.decode("utf-8", "replace"))
    except OSError as e:
        r.update(ok=False, errno=alclient.errname(e))
    finally:
        s.close()
    alclient.emit(r)


if __name__ == "__main__":
    main()
