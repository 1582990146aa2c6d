#!/usr/bin/env python3
"""Escape attempt: move into a child cgroup of the sandbox, then connect.

  child_cgroup.py DEST MARKER [DEST MARKER ...]

Finds the cgroup2 mount from /proc/self/mountinfo and its own cgroup from
/proc/self/cgroup. If it runs in a cgroup namespace (the mount's root shows as
"/.." relative to it), the path it is shown is not the path in the mount, so
it searches the mount for the cgroup whose cgroup.procs lists it. It creates
<own cgroup>/escape-<pid>, moves itself there, then makes one TCP connection
per DEST MARKER pair. Programs attached to the sandbox are inherited by the
child cgroup, so the verdicts must not change. The child cgroup is left in
place (empty once this process exits): removing it is the sandbox's cleanup.
Prints {"client":"child_cgroup","own_dir":..,"child":..,"moved":bool,"results":[..]}.
"""
import os
import sys

import alclient


def cgroup2_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            head, _, tail = line.partition(" - ")
            if tail.split()[0] == "cgroup2":
                fields = head.split()
                return fields[4].replace("\\040", " "), fields[3]
    raise SystemExit("no cgroup2 mount")


def own_cgroup():
    with open("/proc/self/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                return line[3:].strip()
    raise SystemExit("no cgroup v2 line in /proc/self/cgroup")


def lists_me(d):
    try:
        with open(os.path.join(d, "cgroup.procs")) as f:
            return str(os.getpid()) in f.read().split()
    except OSError:
        return False


def find_own_dir(mount, mroot, rel):
    if mroot == "/":
        d = os.path.normpath(mount + rel)
        if lists_me(d):
            return d
    # In a cgroup namespace: look for the cgroup that lists this process.
    for top, dirs, _ in os.walk(mount):
        if top.count(os.sep) - mount.count(os.sep) > 8:
            dirs[:] = []
            continue
        if lists_me(top):
            return top
    return None


def main():
    items = alclient.pairs(sys.argv[1:])
    mount, mroot = cgroup2_mount()
    rel = own_cgroup()
    own = find_own_dir(mount, mroot, rel)
    out = {"client": "child_cgroup", "mount": mount, "mount_root": mroot, "shown": rel, "own_dir": own}
    out["moved"] = False
    if own:
        child = os.path.join(own, "escape-%d" % os.getpid())
        out["child"] = child
        try:
            os.mkdir(child)
            with open(os.path.join(child, "cgroup.procs"), "w") as f:
                f.write("%d\n" % os.getpid())
            out["move_errno"] = None
        except OSError as e:
            out["move_errno"] = alclient.errname(e)
        out["moved"] = lists_me(child) and not lists_me(own)
    out["shown_after"] = own_cgroup()
    out["results"] = []
    for dest, marker in items:
        r = alclient.tcp_send(dest, marker.encode())
        r["marker"] = marker
        out["results"].append(r)
    alclient.emit(out)


if __name__ == "__main__":
    main()
