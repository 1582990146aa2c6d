#!/usr/bin/env python3
"""One HTTP request whose connection waits between connect and request.

  held_request.py START CONNECTED GO DEST MARKER

Waits for the file START, connects to DEST (10.77.0.3:80), creates the file
CONNECTED, waits for GO, then sends "GET /MARKER HTTP/1.1" (Connection:
close) and reads the answer. Prints {"client":"held_request","ok":bool,
"status":N or null,"error":...}.
"""
import socket
import sys

import alclient


def main():
    start, connected, go, dest, marker = sys.argv[1:6]
    out = {"client": "held_request", "ok": False, "status": None}
    if not alclient.wait_for_file(start, 30):
        out["error"] = "no start"
        return alclient.emit(out)
    fam, host, port = alclient.parse_dest(dest)
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(20)
    try:
        s.connect(alclient.sockaddr(fam, host, port))
        open(connected, "w").close()
        if not alclient.wait_for_file(go, 60):
            out["error"] = "no go"
            return alclient.emit(out)
        s.sendall(("GET /%s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (marker, host)).encode())
        out["status"] = alclient.http_answer(s)[0]
        out["ok"] = out["status"] is not None
    except OSError as e:
        out["error"] = alclient.errname(e)
    alclient.emit(out)


if __name__ == "__main__":
    main()
