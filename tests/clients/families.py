#!/usr/bin/env python3
"""Which socket families a process may create.

  families.py NAME...

For each NAME (a family of the table below) it calls socket() with a type
that family supports, and reports the errno name or "ok". Also tries:
  socketpair-unix     socketpair(AF_UNIX, SOCK_STREAM)
  socketpair-tipc     socketpair(AF_TIPC, SOCK_SEQPACKET)
  vsock-upper-bits    socket() with domain 0x1_0000_0028 (AF_VSOCK in the low
                      32 bits, which is what the kernel reads)
  io_uring            io_uring_setup(4, params)
Prints {"client":"families","uid":..,"results":{NAME: "ok"|"EPERM"|...}}.
"""
import ctypes
import os
import socket
import sys

import alclient

libc = ctypes.CDLL(None, use_errno=True)
SYS_SOCKET = 41
SYS_IO_URING_SETUP = 425

# name -> (family, type, protocol)
TABLE = {
    "unix": (1, socket.SOCK_STREAM, 0),
    "inet": (2, socket.SOCK_STREAM, 0),
    "inet6": (10, socket.SOCK_STREAM, 0),
    "netlink-route": (16, socket.SOCK_RAW, 0),  # NETLINK_ROUTE: getaddrinfo's address check
    "netlink": (16, socket.SOCK_RAW, 2),   # NETLINK_USERSOCK: process to process
    "packet": (17, socket.SOCK_DGRAM, 0),
    "rds": (21, socket.SOCK_SEQPACKET, 0),
    "can": (29, socket.SOCK_RAW, 1),
    "tipc": (30, socket.SOCK_RDM, 0),
    "bluetooth": (31, socket.SOCK_RAW, 0),
    "alg": (38, socket.SOCK_SEQPACKET, 0),
    "vsock": (40, socket.SOCK_STREAM, 0),
    "kcm": (41, socket.SOCK_DGRAM, 0),
    "smc": (43, socket.SOCK_STREAM, 0),
    "xdp": (44, socket.SOCK_RAW, 0),
}


def raw_socket(domain, typ, proto):
    fd = libc.syscall(SYS_SOCKET, ctypes.c_ulong(domain), ctypes.c_ulong(typ), ctypes.c_ulong(proto))
    if fd < 0:
        return alclient.errname(ctypes.get_errno())
    os.close(fd)
    return "ok"


def try_one(name):
    if name in TABLE:
        return raw_socket(*TABLE[name])
    if name == "vsock-upper-bits":
        return raw_socket((1 << 32) | 40, socket.SOCK_STREAM, 0)
    if name.startswith("socketpair-"):
        fam = TABLE[name.split("-", 1)[1]][0]
        sv = (ctypes.c_int * 2)()
        typ = socket.SOCK_STREAM if fam == 1 else socket.SOCK_SEQPACKET
        if libc.socketpair(fam, typ, 0, sv) != 0:
            return alclient.errname(ctypes.get_errno())
        os.close(sv[0])
        os.close(sv[1])
        return "ok"
    if name == "io_uring":
        params = ctypes.create_string_buffer(120)
        fd = libc.syscall(SYS_IO_URING_SETUP, 4, params)
        if fd < 0:
            return alclient.errname(ctypes.get_errno())
        os.close(fd)
        return "ok"
    raise SystemExit("unknown family " + name)


def main():
    alclient.emit({"client": "families", "uid": os.getuid(), "results": {n: try_one(n) for n in sys.argv[1:]}})


if __name__ == "__main__":
    main()
