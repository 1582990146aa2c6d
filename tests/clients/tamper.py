#!/usr/bin/env python3
"""What a sandboxed process would try against airlock itself.

  tamper.py PINNED_MAP CGROUP_TARGET
Opens a pinned airlock map with bpf(BPF_OBJ_GET), tries to move itself into
CGROUP_TARGET (a cgroup outside the sandbox), and reports its cgroup after.
Prints {"client":"tamper","uid":..,"obj_get":..,"move":..,"cgroup_after":..}.
"""
import ctypes
import os
import sys

import alclient

SYS_BPF = 321  # x86_64
BPF_OBJ_GET = 7


def obj_get(path):
    libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(path.encode())
    # union bpf_attr for BPF_OBJ_GET: __aligned_u64 pathname; __u32 bpf_fd; __u32 file_flags
    attr = (ctypes.c_uint64 * 8)()
    attr[0] = ctypes.addressof(buf)
    fd = libc.syscall(SYS_BPF, BPF_OBJ_GET, ctypes.byref(attr), 16)
    if fd < 0:
        return alclient.errname(ctypes.get_errno())
    os.close(fd)
    return "opened"


def move(target):
    try:
        with open(os.path.join(target, "cgroup.procs"), "w") as f:
            f.write("%d\n" % os.getpid())
        return "moved"
    except OSError as e:
        return alclient.errname(e)


def main():
    out = {"client": "tamper", "uid": os.getuid(), "obj_get": obj_get(sys.argv[1]), "move": move(sys.argv[2])}
    with open("/proc/self/cgroup") as f:
        out["cgroup_after"] = [l.strip() for l in f if l.startswith("0::")][0][3:]
    alclient.emit(out)


if __name__ == "__main__":
    main()
