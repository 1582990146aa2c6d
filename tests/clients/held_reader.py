#!/usr/bin/env python3
"""A process the freezer cannot reach, then a violation.

  held_reader.py FILE DIR VIOLATION

1. forks a child that reads FILE (a file of fuse_hang, whose reads wait for
   the test: the child sleeps in the kernel where the freezer cannot stop it);
2. waits for DIR/go, then sends one datagram to VIOLATION (UDP sendto, a
   destination the policy denies);
3. waits for the child, which returns once the test releases the read;
   writes DIR/read.json with what it read; lingers until killed, or exits 3
   after 60 seconds in all.
"""
import os
import socket
import sys
import time

import alclient


def main():
    path, d, violation = sys.argv[1], sys.argv[2], sys.argv[3]
    started = time.monotonic()
    child = os.fork()
    if child == 0:
        try:
            with open(path, "rb") as f:
                data = f.read(64)
            out = {"read": data.decode("ascii", "replace")}
        except OSError as e:
            out = {"error": alclient.errname(e)}
        alclient.write_json_atomic(os.path.join(d, "read.json"), out)
        os._exit(0)
    if not alclient.wait_for_file(os.path.join(d, "go"), 30):
        sys.exit(3)
    family, host, port = alclient.parse_dest(violation)
    s = socket.socket(family, socket.SOCK_DGRAM)
    try:
        s.sendto(b"held-reader-violation", alclient.sockaddr(family, host, port))
    except OSError:
        pass
    os.waitpid(child, 0)
    while time.monotonic() - started < 60:
        time.sleep(0.1)
    sys.exit(3)


if __name__ == "__main__":
    main()
