#!/usr/bin/env python3
"""A target of the operator's, as a transparent proxy is one: it asks each
connection where it was meant to go.

  target_sim.py PORT RECORDS READY [late]

Listens for TCP on 127.0.0.1:PORT and [::1]:PORT (v6-only) and for UDP on
127.0.0.1:PORT and [::1]:PORT. For each TCP connection it asks
getsockopt(SO_ORIGINAL_DST) as mitmproxy and squid do (SOL_IP on an IPv4
connection, SOL_IPV6 on an IPv6 one), reads one request line, answers
"HTTP/1.1 200" with "target ORIGINAL" as the body, and appends to RECORDS
{"proto":"tcp","peer","peer_port","original" ("ADDR:PORT", "[ADDR]:PORT",
or null),"error" (errno name when unanswered),"line"}. A datagram is
appended as {"proto":"udp","peer","peer_port","data"} and answered with
"target:" + data. READY is written once every socket listens. With
"late" (IPv4), it reads each connection to its end, acknowledges the
client's FIN at once (TCP_QUICKACK), waits (at most 5 s) until the
client's end is a time-wait socket in /proc/net/tcp, i.e. the client's
own socket is closed in the kernel, and only then asks, its own socket
still open; the record's "closed" says whether the wait ended so. It
answers nothing.
"""
import errno
import json
import socket
import struct
import sys
import threading
import time

SO_ORIGINAL_DST = 80
SOL_IPV6 = 41

lock = threading.Lock()


def record(path, obj):
    with lock, open(path, "a") as f:
        f.write(json.dumps(obj) + "\n")
        f.flush()


def original(conn):
    try:
        if conn.family == socket.AF_INET:
            raw = conn.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
            port, addr = struct.unpack_from("!2xH4s", raw)
            return "%s:%d" % (socket.inet_ntop(socket.AF_INET, addr), port), None
        raw = conn.getsockopt(SOL_IPV6, SO_ORIGINAL_DST, 28)
        port, addr = struct.unpack_from("!2xH4x16s", raw)
        return "[%s]:%d" % (socket.inet_ntop(socket.AF_INET6, addr), port), None
    except OSError as e:
        return None, errno.errorcode.get(e.errno, str(e.errno))


def proc_addr(addr):
    """An IPv4 address and port as /proc/net/tcp writes them (x86)."""
    return "%08X:%04X" % (struct.unpack("<I", socket.inet_aton(addr[0]))[0], addr[1])


def client_closed(conn, timeout=5.0):
    """Until the client's end of conn is a time-wait socket (timer 3) in
    /proc/net/tcp: its full socket is closed, as an orphan's is on the ACK
    of its FIN."""
    local, remote = proc_addr(conn.getpeername()), proc_addr(conn.getsockname())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open("/proc/net/tcp") as f:
            for line in f.readlines()[1:]:
                p = line.split()
                if p[1] == local and p[2] == remote and p[5].split(":")[0] == "03":
                    return True
        time.sleep(0.001)
    return False


def serve_tcp(conn, path, late):
    with conn:
        peer = conn.getpeername()
        if not late:
            orig, err = original(conn)
        conn.settimeout(5)
        data = b""
        try:
            while late or b"\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
        line = data.split(b"\r\n", 1)[0].decode("utf-8", "replace")
        if late:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
            closed = client_closed(conn)
            orig, err = original(conn)
            record(path, {"proto": "tcp", "peer": peer[0], "peer_port": peer[1], "original": orig, "error": err,
                          "line": line, "closed": closed})
            return
        record(path, {"proto": "tcp", "peer": peer[0], "peer_port": peer[1], "original": orig, "error": err,
                      "line": line})
        body = ("target %s\n" % orig).encode()
        try:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
        except OSError:
            pass


def accept_loop(ls, path, late):
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=serve_tcp, args=(conn, path, late), daemon=True).start()


def udp_loop(us, path):
    while True:
        data, peer = us.recvfrom(65535)
        record(path, {"proto": "udp", "peer": peer[0], "peer_port": peer[1],
                      "data": data.decode("utf-8", "replace")})
        us.sendto(b"target:" + data, peer)


def main():
    port, path, ready = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    late = sys.argv[4:] == ["late"]
    threads = []
    for fam, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        ls = socket.socket(fam, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if fam == socket.AF_INET6:
            ls.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        ls.bind((host, port))
        ls.listen(64)
        threads.append(threading.Thread(target=accept_loop, args=(ls, path, late), daemon=True))
        us = socket.socket(fam, socket.SOCK_DGRAM)
        if fam == socket.AF_INET6:
            us.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        us.bind((host, port))
        threads.append(threading.Thread(target=udp_loop, args=(us, path), daemon=True))
    for t in threads:
        t.start()
    with open(ready, "w") as f:
        f.write("ready\n")
    threading.Event().wait()


if __name__ == "__main__":
    main()
