#!/usr/bin/env python3
"""Ring-buffer flood: N denied datagrams as fast as Python can send them,
then wait for GO before exiting, so the test can read the sandbox's kernel
counters while it still exists.

  flood.py ADDR PORT COUNT GO_FILE
Prints {"client":"flood","sent":..,"eperm":..,"other":..}.
"""
import errno
import json
import os
import socket
import sys
import time


def main():
    addr, port, count, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sent = eperm = other = 0
    payload = b"AIRLOCK-FLOOD"
    for _ in range(count):
        try:
            s.sendto(payload, (addr, port))
            sent += 1
        except OSError as e:
            if e.errno == errno.EPERM:
                eperm += 1
            else:
                other += 1
    print(json.dumps({"client": "flood", "sent": sent, "eperm": eperm, "other": other}), flush=True)
    deadline = time.time() + 30
    while not os.path.exists(go) and time.time() < deadline:
        time.sleep(0.01)


if __name__ == "__main__":
    main()
