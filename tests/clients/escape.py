#!/usr/bin/env python3
"""uid 0 inside a sandbox, trying every way out of its cgroup it can find.

  escape.py --dest ADDR:PORT --marker M --progress FILE --go FILE --scope NAME
            [--cgroup DIR ...] [--pin FILE ...]

After each attempt it makes one TCP connection to DEST (a destination its
policy denies) carrying M-<n>: if any attempt had moved it (or a child) out
of the sandbox, that connection would leave unjudged and reach the sink.

Attempts:
  procs      write its PID to every cgroup.procs it can open: the --cgroup
             directories given (host paths of the root, the sandbox's parent,
             a sibling), every cgroup2 mount of /proc/self/mountinfo walked
             (its root, and every cgroup whose path holds NAME: were a
             defence to fail, it must not land in anyone else's cgroup), and
             the same under /proc/*/root/
  clone3     clone3(CLONE_INTO_CGROUP) with every cgroup directory it can
             open; a child that is born makes its own connection, then exits
  handle     open_by_handle_at(cgroup2 mount, kernfs handle of each
             --cgroup-id), then write cgroup.procs through the fd it got
  mount      mount cgroup2 on a fresh directory, then try procs there
  userns     in a child: unshare(CLONE_NEWUSER|CLONE_NEWNS[|CLONE_NEWCGROUP]),
             mount cgroup2, try procs there
  pins       BPF_OBJ_GET on every --pin path, every file of every bpf mount
             whose path holds NAME, and the same under /proc/*/root/
When done it writes {"done": true, ...} to --progress and waits (up to 60 s)
for --go to exist, so that the test can read its cgroup from outside.
Prints {"client":"escape","uid":..,"attempts":[..],"connects":N,"moved":[..],"opened":[..]}.
"""
import argparse
import ctypes
import os
import socket
import struct
import sys
import tempfile

import alclient

libc = ctypes.CDLL(None, use_errno=True)
SYS_BPF = 321
SYS_CLONE3 = 435
SYS_OPEN_BY_HANDLE_AT = 304
BPF_OBJ_GET = 7
CLONE_INTO_CGROUP = 0x200000000
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWCGROUP = 0x02000000
MAX_DIRS = 4000


def mounts(fstype):
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            head, _, tail = line.partition(" - ")
            if tail.split()[0] == fstype:
                out.append(head.split()[4].replace("\\040", " "))
    return out


def walk_dirs(top):
    found = []
    for root, dirs, _ in os.walk(top, onerror=lambda e: None):
        found.append(root)
        if len(found) >= MAX_DIRS:
            break
    return found


def proc_roots():
    roots = []
    for p in os.listdir("/proc"):
        if p.isdigit() and p != str(os.getpid()):
            roots.append("/proc/%s/root" % p)
    return roots


class Escape:
    def __init__(self, a):
        self.a = a
        self.attempts = []
        self.connects = 0
        self.moved = []
        self.opened = []

    def connect(self):
        self.connects += 1
        r = alclient.tcp_send(self.a.dest, ("%s-%d" % (self.a.marker, self.connects)).encode(), timeout=2.0)
        return r.get("errno") or ("ok" if r.get("ok") else "failed")

    def record(self, what, target, result):
        self.attempts.append({"what": what, "target": target, "result": result, "after": self.connect()})

    def in_scope(self, top, d):
        """The root of a mount, or a cgroup whose path names --scope: even if
        a defence fails, the client never lands in a cgroup of someone else's
        (only in the root, or in the test's own)."""
        return d == top or self.a.scope in os.path.relpath(d, top)

    def cgroup_dirs(self):
        dirs = list(self.a.cgroup)
        tops = [m for m in mounts("cgroup2")]
        tops += [r + m for r in proc_roots() for m in mounts("cgroup2") if os.path.isdir(r + m)]
        for t in tops:
            dirs += [d for d in walk_dirs(t) if self.in_scope(t, d)]
        for r in proc_roots():
            for c in self.a.cgroup:
                dirs.append(r + c)
        return sorted(set(dirs))

    def write_procs(self, d, what):
        p = os.path.join(d, "cgroup.procs")
        try:
            with open(p, "w") as f:
                f.write("%d\n" % os.getpid())
            res = "written"
        except OSError as e:
            res = alclient.errname(e)
        if res == "written":
            self.moved.append(p)
        # Only what exists is worth a line (and a connection).
        if res != "ENOENT":
            self.record(what, p, res)

    def procs(self):
        for d in self.cgroup_dirs():
            self.write_procs(d, "procs")

    def clone3(self):
        for d in self.cgroup_dirs():
            try:
                fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
            except OSError as e:
                if e.errno != 2:
                    self.record("clone3-open", d, alclient.errname(e))
                continue
            # struct clone_args: flags pidfd child_tid parent_tid exit_signal
            # stack stack_size tls set_tid set_tid_size cgroup
            args = struct.pack("=11Q", CLONE_INTO_CGROUP, 0, 0, 0, 17, 0, 0, 0, 0, 0, fd)
            buf = ctypes.create_string_buffer(args, len(args))
            pid = libc.syscall(SYS_CLONE3, buf, len(args))
            if pid == 0:
                # Born wherever clone3 put it: it says so the only way that counts.
                alclient.tcp_send(self.a.dest, ("%s-child" % self.a.marker).encode(), timeout=2.0)
                os._exit(0)
            if pid < 0:
                res = alclient.errname(ctypes.get_errno())
            else:
                os.waitpid(pid, 0)
                self.connects += 1  # the child's
                res = "born"
                self.moved.append("clone3:" + d)
            os.close(fd)
            self.record("clone3", d, res)

    def mount_cgroup2(self, what):
        d = tempfile.mkdtemp(prefix="escape-cg-")
        try:
            rc = libc.mount(b"none", d.encode(), b"cgroup2", 0, None)
            if rc != 0:
                self.record(what, d, alclient.errname(ctypes.get_errno()))
                return
            self.record(what, d, "mounted")
            for sub in walk_dirs(d):
                if self.in_scope(d, sub):
                    self.write_procs(sub, what + "-procs")
        finally:
            libc.umount2(d.encode(), 2)
            try:
                os.rmdir(d)
            except OSError:
                pass

    def userns(self, flags, what):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            e = Escape(self.a)
            e.connects = 1000 * (len(self.attempts) + 1)  # its markers differ from the parent's
            if libc.unshare(flags) != 0:
                e.attempts.append({"what": what, "target": "unshare", "result": alclient.errname(ctypes.get_errno()),
                                   "after": e.connect()})
            else:
                e.mount_cgroup2(what)
            os.write(w, alclient.json.dumps({"attempts": e.attempts, "moved": e.moved,
                                             "connects": e.connects - 1000 * (len(self.attempts) + 1)}).encode())
            os._exit(0)
        os.close(w)
        data = b""
        while True:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            data += chunk
        os.close(r)
        os.waitpid(pid, 0)
        res = alclient.json.loads(data.decode() or "{}")
        self.attempts += res.get("attempts", [])
        self.moved += res.get("moved", [])
        self.connects += res.get("connects", 0)

    def handles(self):
        """open_by_handle_at on the cgroup2 it sees, with the kernfs handle
        (FILEID_KERNFS 0xfe, the cgroup id) of a cgroup outside it: needs
        CAP_DAC_READ_SEARCH, or the handle must lie below the mount's root."""
        for m in mounts("cgroup2"):
            try:
                mfd = os.open(m, os.O_RDONLY | os.O_DIRECTORY)
            except OSError as e:
                self.record("handle", m, alclient.errname(e))
                continue
            for cid in self.a.cgroup_id:
                h = struct.pack("=Ii", 8, 0xFE) + struct.pack("=Q", cid)
                buf = ctypes.create_string_buffer(h, len(h))
                fd = libc.syscall(SYS_OPEN_BY_HANDLE_AT, mfd, buf, os.O_RDONLY | os.O_DIRECTORY)
                if fd < 0:
                    self.record("handle", "%s#%d" % (m, cid), alclient.errname(ctypes.get_errno()))
                    continue
                # An fd on a cgroup outside: try to move there through it.
                try:
                    pfd = os.open("cgroup.procs", os.O_WRONLY, dir_fd=fd)
                    os.write(pfd, b"%d\n" % os.getpid())
                    os.close(pfd)
                    res = "written"
                    self.moved.append("handle:%d" % cid)
                except OSError as e:
                    res = "opened-" + alclient.errname(e)
                os.close(fd)
                self.record("handle", "%s#%d" % (m, cid), res)
            os.close(mfd)

    def pins(self):
        paths = list(self.a.pin)
        for m in mounts("bpf"):
            for root, _, files in os.walk(m, onerror=lambda e: None):
                paths += [os.path.join(root, f) for f in files]
        for r in proc_roots():
            paths += [r + p for p in self.a.pin]
            for m in mounts("bpf"):
                if os.path.isdir(r + m):
                    for root, _, files in os.walk(r + m, onerror=lambda e: None):
                        paths += [os.path.join(root, f) for f in files]
        # Only the test's own pins (and any path it was given): a failed
        # defence must not have it open anyone else's.
        for p in sorted(set(p for p in paths if self.a.scope in p)):
            buf = ctypes.create_string_buffer(p.encode())
            attr = (ctypes.c_uint64 * 8)()
            attr[0] = ctypes.addressof(buf)
            fd = libc.syscall(SYS_BPF, BPF_OBJ_GET, ctypes.byref(attr), 16)
            if fd >= 0:
                os.close(fd)
                self.opened.append(p)
                self.record("pin", p, "opened")
            else:
                self.record("pin", p, alclient.errname(ctypes.get_errno()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dest", required=True)
    ap.add_argument("--marker", required=True)
    ap.add_argument("--progress", required=True)
    ap.add_argument("--go", required=True)
    ap.add_argument("--cgroup", action="append", default=[])
    ap.add_argument("--scope", required=True)
    ap.add_argument("--pin", action="append", default=[])
    ap.add_argument("--cgroup-id", action="append", default=[], type=int)
    a = ap.parse_args()
    e = Escape(a)
    e.procs()
    e.clone3()
    e.handles()
    e.mount_cgroup2("mount")
    e.userns(CLONE_NEWUSER | CLONE_NEWNS, "userns")
    e.userns(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWCGROUP, "userns-cgroupns")
    e.pins()
    with open("/proc/self/cgroup") as f:
        own = [l.strip() for l in f if l.startswith("0::")][0][3:]
    out = {"client": "escape", "uid": os.getuid(), "attempts": e.attempts, "connects": e.connects,
           "moved": e.moved, "opened": e.opened, "cgroup_seen": own,
           "cgroup2_mounts": mounts("cgroup2"), "bpf_mounts": mounts("bpf")}
    alclient.write_json_atomic(a.progress, {"done": True})
    alclient.wait_for_file(a.go, 60)
    alclient.emit(out)


if __name__ == "__main__":
    main()
