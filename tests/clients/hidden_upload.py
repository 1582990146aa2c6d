#!/usr/bin/env python3
"""An upload from a child cgroup that is gone by the time the sandbox ends.

  hidden_upload.py DEST MARKER BYTES

Makes <own cgroup>/hide-<pid> (as child_cgroup.py finds its own cgroup),
moves itself there, connects to DEST and sends MARKER and then BYTES bytes
of 'x' without blocking (what the socket takes), waits a second, closes
the socket, moves back and removes the child cgroup: the socket, and what
egress refused of it, is left to the kernel with the id of a cgroup that
no longer exists.
Prints {"client":"hidden_upload","moved":bool,"removed":bool,"queued":N,
"errno":..}.
"""
import os
import socket
import sys
import time

import alclient
from child_cgroup import cgroup2_mount, find_own_dir, lists_me, own_cgroup


def main():
    dest, marker, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    out = {"client": "hidden_upload", "moved": False, "removed": False, "queued": 0, "errno": None}
    mount, mroot = cgroup2_mount()
    own = find_own_dir(mount, mroot, own_cgroup())
    if not own:
        out["errno"] = "no own cgroup"
        alclient.emit(out)
        return
    child = os.path.join(own, "hide-%d" % os.getpid())
    try:
        os.mkdir(child)
        with open(os.path.join(child, "cgroup.procs"), "w") as f:
            f.write("%d\n" % os.getpid())
        out["moved"] = lists_me(child)
        fam, host, port = alclient.parse_dest(dest)
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.settimeout(5.0)
        s.connect(alclient.sockaddr(fam, host, port))
        s.setblocking(False)
        payload = marker.encode() + b"x" * n
        try:
            while out["queued"] < len(payload):
                out["queued"] += s.send(payload[out["queued"]:])
        except BlockingIOError:
            pass
        time.sleep(1)
        s.close()
        with open(os.path.join(own, "cgroup.procs"), "w") as f:
            f.write("%d\n" % os.getpid())
        os.rmdir(child)
        out["removed"] = not os.path.exists(child)
    except OSError as e:
        out["errno"] = alclient.errname(e)
    alclient.emit(out)


if __name__ == "__main__":
    main()
