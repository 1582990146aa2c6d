#!/usr/bin/env python3
"""Fire and forget: connects to DEST, sends MARKER and a newline, and
closes at once, waiting for nothing.

  send_and_close.py DEST MARKER

Prints {"client":"send_and_close","dst","port","marker","ok","errno"}.
"""
import socket
import sys

import alclient


def main():
    dest, marker = sys.argv[1], sys.argv[2]
    fam, host, port = alclient.parse_dest(dest)
    r = {"client": "send_and_close", "dst": host, "port": port, "marker": marker}
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(5.0)
    try:
        s.connect(alclient.sockaddr(fam, host, port))
        s.sendall((marker + "\n").encode())
        r.update(ok=True, errno=None)
    except OSError as e:
        r.update(ok=False, errno=alclient.errname(e))
    finally:
        s.close()
    alclient.emit(r)


if __name__ == "__main__":
    main()
