#!/usr/bin/env python3
"""sendmmsg(2) on one unconnected UDP socket, one message per DEST MARKER pair.

  sendmmsg.py DEST MARKER [DEST MARKER ...]

Every message carries its own destination, so the kernel runs sendmsg4/6 per
message. When a message fails, sendmmsg returns how many went before it; the
client then records that message's errno and goes on with the rest, like a
real program would. All DESTs must be of one family.
Prints {"client":"sendmmsg","calls":[..],"results":[{dst,port,ok,errno}]}.
"""
import ctypes
import socket
import struct
import sys

import alclient


class iovec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


class msghdr(ctypes.Structure):
    _fields_ = [
        ("msg_name", ctypes.c_void_p),
        ("msg_namelen", ctypes.c_uint32),
        ("msg_iov", ctypes.POINTER(iovec)),
        ("msg_iovlen", ctypes.c_size_t),
        ("msg_control", ctypes.c_void_p),
        ("msg_controllen", ctypes.c_size_t),
        ("msg_flags", ctypes.c_int),
    ]


class mmsghdr(ctypes.Structure):
    _fields_ = [("msg_hdr", msghdr), ("msg_len", ctypes.c_uint)]


def raw_sockaddr(fam, host, port):
    if fam == socket.AF_INET6:
        return struct.pack("=HHI16sI", socket.AF_INET6, socket.htons(port), 0,
                           socket.inet_pton(socket.AF_INET6, host), 0)
    return struct.pack("=HH4s8x", socket.AF_INET, socket.htons(port), socket.inet_pton(socket.AF_INET, host))


def main():
    items = alclient.pairs(sys.argv[1:])
    dests = [alclient.parse_dest(d) for d, _ in items]
    fam = dests[0][0]
    if any(d[0] != fam for d in dests):
        raise SystemExit("sendmmsg.py: all destinations must be of one family")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.sendmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
    libc.sendmmsg.restype = ctypes.c_int

    n = len(items)
    keep = []  # keeps the buffers alive
    msgs = (mmsghdr * n)()
    for i, ((_, marker), (f, host, port)) in enumerate(zip(items, dests)):
        name = ctypes.create_string_buffer(raw_sockaddr(f, host, port))
        data = ctypes.create_string_buffer(marker.encode(), len(marker))
        iov = iovec(ctypes.cast(data, ctypes.c_void_p), len(marker))
        keep += [name, data, iov]
        msgs[i].msg_hdr.msg_name = ctypes.cast(name, ctypes.c_void_p)
        msgs[i].msg_hdr.msg_namelen = len(name.raw) - 1  # create_string_buffer adds a NUL
        msgs[i].msg_hdr.msg_iov = ctypes.pointer(iov)
        msgs[i].msg_hdr.msg_iovlen = 1

    s = socket.socket(fam, socket.SOCK_DGRAM)
    results = [None] * n
    calls = []
    off = 0
    while off < n:
        r = libc.sendmmsg(s.fileno(), ctypes.addressof(msgs) + off * ctypes.sizeof(mmsghdr), n - off, 0)
        if r < 0:
            e = ctypes.get_errno()
            calls.append({"first": off, "ret": -1, "errno": alclient.errname(e)})
            results[off] = {"ok": False, "errno": alclient.errname(e)}
            off += 1
        elif r == 0:
            calls.append({"first": off, "ret": 0})
            break
        else:
            calls.append({"first": off, "ret": r})
            for i in range(off, off + r):
                results[i] = {"ok": True, "errno": None, "sent": msgs[i].msg_len}
            off += r
    s.close()
    out = []
    for i, ((_, marker), (f, host, port)) in enumerate(zip(items, dests)):
        r = results[i] or {"ok": False, "errno": "not-attempted"}
        r.update(dst=host, port=port, marker=marker, proto="udp")
        out.append(r)
    alclient.emit({"client": "sendmmsg", "calls": calls, "results": out})


if __name__ == "__main__":
    main()
