#!/usr/bin/env python3
"""What a sandbox can still do once its quarantine latch is set, with nobody
freezing it (its agent is gone): flows opened before, and new sockets.

  latch_probe.py TCP_DEST UDP_DEST DENIED_DEST DIR PREFIX

Opens a TCP connection to TCP_DEST and a connected UDP socket to UDP_DEST
and sends PREFIX-PRE-TCP / PREFIX-PRE-UDP on them, then writes DIR/ready.
At DIR/go a child makes one connect to DENIED_DEST (the violation; it may be
stopped or killed in that call). At DIR/latched it sends PREFIX-POST-TCP and
PREFIX-POST-UDP on the old flows and creates a new UDP socket, then writes
DIR/result.json: {"post_tcp": R, "post_udp": R, "new_socket": R}, each R
{"ok": bool, "errno": name|null}. Then it waits to be killed.
"""
import errno
import json
import os
import socket
import sys
import time


def parse(dest):
    host, port = dest.rsplit(":", 1)
    return host.strip("[]"), int(port)


def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.01)


def attempt(fn):
    try:
        fn()
        return {"ok": True, "errno": None}
    except OSError as e:
        return {"ok": False, "errno": errno.errorcode.get(e.errno, str(e.errno))}


def main():
    tcp_dest, udp_dest, denied, d, prefix = sys.argv[1:6]
    tcp = socket.create_connection(parse(tcp_dest), timeout=5)
    tcp.sendall((prefix + "-PRE-TCP").encode())
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.connect(parse(udp_dest))
    udp.send((prefix + "-PRE-UDP").encode())
    open(os.path.join(d, "ready"), "w").close()
    wait_for(os.path.join(d, "go"))
    if os.fork() == 0:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.connect(parse(denied))
        except OSError:
            pass
        os._exit(0)
    wait_for(os.path.join(d, "latched"))
    out = {
        "post_tcp": attempt(lambda: tcp.sendall((prefix + "-POST-TCP").encode())),
        "post_udp": attempt(lambda: udp.send((prefix + "-POST-UDP").encode())),
        "new_socket": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close()),
    }
    tmp = os.path.join(d, "result.json.tmp")
    with open(tmp, "w") as f:
        json.dump(out, f)
    os.rename(tmp, os.path.join(d, "result.json"))
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
