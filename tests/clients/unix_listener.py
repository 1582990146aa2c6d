#!/usr/bin/env python3
"""Unix-socket listeners, outside or inside a sandbox: the sink of the unix tests.

  unix_listener.py LOG READY KIND ADDRESS [KIND ADDRESS ...]

  KIND stream: a listening SOCK_STREAM socket; every accepted connection's
       bytes are logged when it closes. KIND dgram: a SOCK_DGRAM socket, one
       log line per datagram. ADDRESS: a path (made world-writable, so that
       an unprivileged sandbox can reach it) or @NAME for an abstract name.
Each log line is JSON {"addr", "kind", "data"} (data in latin-1), appended
and flushed. READY is written once every socket is bound. Runs until killed.
"""
import json
import os
import selectors
import socket
import sys


def address(spec):
    if spec.startswith("@"):
        return b"\0" + spec[1:].encode().decode("unicode_escape").encode("latin-1")
    return spec


def main():
    log_path, ready = sys.argv[1], sys.argv[2]
    pairs = sys.argv[3:]
    log = open(log_path, "a")
    sel = selectors.DefaultSelector()
    for i in range(0, len(pairs), 2):
        kind, spec = pairs[i], pairs[i + 1]
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM if kind == "stream" else socket.SOCK_DGRAM)
        s.bind(address(spec))
        if not spec.startswith("@"):
            os.chmod(spec, 0o777)
        if kind == "stream":
            s.listen(64)
        sel.register(s, selectors.EVENT_READ, ("listen" if kind == "stream" else "dgram", spec, None))
    with open(ready + ".tmp", "w") as f:
        f.write("ready\n")
    os.rename(ready + ".tmp", ready)

    def write(spec, kind, data):
        log.write(json.dumps({"addr": spec, "kind": kind, "data": data.decode("latin-1")}) + "\n")
        log.flush()

    while True:
        for key, _ in sel.select():
            role, spec, buf = key.data
            s = key.fileobj
            if role == "listen":
                c, _ = s.accept()
                sel.register(c, selectors.EVENT_READ, ("conn", spec, bytearray()))
            elif role == "dgram":
                write(spec, "dgram", s.recv(65536))
            else:
                data = s.recv(65536)
                if data:
                    buf.extend(data)
                else:
                    sel.unregister(s)
                    s.close()
                    write(spec, "stream", bytes(buf))


if __name__ == "__main__":
    main()
