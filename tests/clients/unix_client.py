#!/usr/bin/env python3
"""Unix-socket egress attempts, one per MODE ADDRESS MARKER triple.

  unix_client.py MODE ADDRESS MARKER [MODE ADDRESS MARKER ...]

  stream   connect(ADDRESS) on a SOCK_STREAM socket, then send MARKER (connect_unix)
  dgram    sendto(ADDRESS) from an unconnected SOCK_DGRAM socket      (sendmsg_unix)
  dconnect connect(ADDRESS) on a SOCK_DGRAM socket, then send          (connect_unix)

ADDRESS is a path, or @NAME for an abstract name (\\xNN escapes allowed).
Prints {"client":"unix_client","results":[{marker,mode,addr,ok,stage,errno}]}.
"""
import socket
import sys

import alclient


def address(spec):
    if spec.startswith("@"):
        return b"\0" + spec[1:].encode().decode("unicode_escape").encode("latin-1")
    return spec


def one(mode, spec, marker):
    r = {"marker": marker, "mode": mode, "addr": spec}
    kind = socket.SOCK_STREAM if mode == "stream" else socket.SOCK_DGRAM
    s = socket.socket(socket.AF_UNIX, kind)
    stage = "connect"
    try:
        if mode == "dgram":
            stage = "sendto"
            s.sendto(marker.encode(), address(spec))
        else:
            s.connect(address(spec))
            stage = "send"
            s.send(marker.encode())
        r.update(ok=True, stage=stage, errno=None)
    except OSError as e:
        r.update(ok=False, stage=stage, errno=alclient.errname(e))
    finally:
        s.close()
    return r


def main():
    items = sys.argv[1:]
    if len(items) % 3:
        sys.exit("usage: unix_client.py MODE ADDRESS MARKER ...")
    results = [one(items[i], items[i + 1], items[i + 2]) for i in range(0, len(items), 3)]
    alclient.emit({"client": "unix_client", "results": results})


if __name__ == "__main__":
    main()
