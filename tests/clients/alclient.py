"""Shared helpers of the integration-test clients (Python 3 stdlib only).

Every client prints exactly one JSON result line on stdout (and may write
progress or report files the test asked for). Errors are reported by errno
name ("EPERM"), never raised: a client must finish and report whatever the
kernel did to it.
"""
import errno
import json
import os
import socket
import sys
import time


def errname(e):
    if isinstance(e, OSError):
        if e.errno is None:
            return "OSError:" + str(e)
        return errno.errorcode.get(e.errno, str(e.errno))
    if isinstance(e, int):
        return errno.errorcode.get(e, str(e))
    return type(e).__name__


def emit(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def http_answer(s):
    """Reads an HTTP answer to its end (the server closes): (status or None, body)."""
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].split(b" ")
    return (int(status[1]) if len(status) > 1 and status[1].isdigit() else None), body


def parse_dest(s):
    """'10.77.0.2:9000', '[fd77::2]:9000' or '[::ffff:10.77.0.3]:9000' -> (family, host, port)."""
    if s.startswith("["):
        host, _, port = s[1:].partition("]:")
        return socket.AF_INET6, host, int(port)
    host, _, port = s.rpartition(":")
    return socket.AF_INET, host, int(port)


def sockaddr(family, host, port):
    if family == socket.AF_INET6:
        return (host, port, 0, 0)
    return (host, port)


def pairs(items):
    if len(items) % 2:
        raise SystemExit("arguments come in DEST MARKER pairs")
    return [(items[i], items[i + 1]) for i in range(0, len(items), 2)]


def write_json_atomic(path, obj):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def wait_for_file(path, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            return True
        time.sleep(0.005)
    return False


def finish_send(s):
    """Half-closes s and waits for the peer's close, so that the data has arrived."""
    s.shutdown(socket.SHUT_WR)
    try:
        while s.recv(4096):
            pass
    except OSError:
        pass


def tcp_send(dest, payload, fastopen=False, timeout=3.0):
    """connect (or sendto MSG_FASTOPEN) and send payload; returns a result dict."""
    fam, host, port = parse_dest(dest)
    r = {"dst": host, "port": port, "proto": "tcp", "fastopen": fastopen}
    try:
        s = socket.socket(fam, socket.SOCK_STREAM)
    except OSError as e:
        r.update(ok=False, stage="socket", errno=errname(e))
        return r
    s.settimeout(timeout)
    try:
        if fastopen:
            n = s.sendto(payload, socket.MSG_FASTOPEN, sockaddr(fam, host, port))
            if n < len(payload):
                s.sendall(payload[n:])
        else:
            s.connect(sockaddr(fam, host, port))
            s.sendall(payload)
        finish_send(s)
        r.update(ok=True, errno=None)
    except OSError as e:
        r.update(ok=False, stage="connect", errno=errname(e))
    finally:
        s.close()
    return r
