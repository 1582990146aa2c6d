#!/usr/bin/env python3
"""Abstract unix sockets and signals across a Landlock scope.

  abstract.py listen NAME READY OUT SECONDS   bind @NAME, write READY, then
                                             append everything received to OUT
                                             until SECONDS pass
  abstract.py connect NAME PAYLOAD           connect to @NAME and send PAYLOAD
  abstract.py pair NAME PAYLOAD              both ends in this process tree:
                                             a forked child listens, the parent
                                             connects and sends
  abstract.py kill PID                       kill(PID, SIGTERM)
  abstract.py kill-own                       fork a child, kill(child, SIGTERM)
Prints {"client":"abstract","mode":..,"ok":bool,"errno":..,...}.
"""
import os
import signal
import socket
import sys
import time

import alclient


def listen(name, ready, out, seconds):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\0" + name)
    s.listen(8)
    s.settimeout(0.2)
    open(ready, "w").close()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            c, _ = s.accept()
        except socket.timeout:
            continue
        c.settimeout(2)
        data = b""
        try:
            while True:
                chunk = c.recv(65536)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
        c.close()
        with open(out, "ab") as f:
            f.write(data + b"\n")


def connect(name, payload):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("\0" + name)
        s.sendall(payload.encode())
        s.shutdown(socket.SHUT_WR)
        return {"ok": True, "errno": None}
    except OSError as e:
        return {"ok": False, "errno": alclient.errname(e)}
    finally:
        s.close()


def pair(name, payload):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind("\0" + name)
        s.listen(1)
        os.write(w, b"r")
        c, _ = s.accept()
        data = b""
        while True:
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
        os.write(w, data)
        os._exit(0)
    os.close(w)
    os.read(r, 1)
    res = connect(name, payload)
    got = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        got += chunk
    os.waitpid(pid, 0)
    res["received"] = got.decode(errors="replace")
    return res


def kill(pid):
    try:
        os.kill(pid, signal.SIGTERM)
        return {"ok": True, "errno": None}
    except OSError as e:
        return {"ok": False, "errno": alclient.errname(e)}


def kill_own():
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    res = kill(pid)
    _, st = os.waitpid(pid, 0)
    res["child_signal"] = os.WTERMSIG(st) if os.WIFSIGNALED(st) else None
    return res


def main():
    mode = sys.argv[1]
    if mode == "listen":
        listen(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]))
        return
    if mode == "connect":
        res = connect(sys.argv[2], sys.argv[3])
    elif mode == "pair":
        res = pair(sys.argv[2], sys.argv[3])
    elif mode == "kill":
        res = kill(int(sys.argv[2]))
    else:
        res = kill_own()
    res.update({"client": "abstract", "mode": mode})
    alclient.emit(res)


if __name__ == "__main__":
    main()
