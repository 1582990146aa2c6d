#!/usr/bin/env python3
"""Bulk bytes both ways through an SNI gate: resolves NAME (the system's
resolver), connects to it on PORT, sends a real ClientHello naming NAME
(Python's ssl, the handshake never finished), then BYTES bytes of a seeded
pseudo-random stream, and shuts down its side while reading what comes
back to its end (an echo server sends it all back).

  gate_echo.py NAME PORT BYTES [TIMEOUT]

Prints {"client":"gate_echo","dst":..,"sent":N,"received":N,"same":bool,
"hello":N,"errno":..}: sent counts the ClientHello too; same is whether
what came back is byte for byte what was sent.
"""
import errno
import hashlib
import json
import random
import socket
import ssl
import sys
import threading


def client_hello(name):
    ctx = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname=name)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def main():
    name, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    timeout = float(sys.argv[4]) if len(sys.argv) > 4 else 10.0
    out = {"client": "gate_echo", "dst": "", "sent": 0, "received": 0, "same": False, "hello": 0, "errno": 0}
    hello = client_hello(name)
    out["hello"] = len(hello)
    payload = random.Random(n).randbytes(n)
    sent_hash, back_hash = hashlib.sha256(), hashlib.sha256()
    try:
        ai = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)[0]
        out["dst"] = ai[4][0]
        s = socket.socket(ai[0], socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(ai[4])
        received = [0]

        def reader():
            try:
                while True:
                    b = s.recv(1 << 16)
                    if not b:
                        return
                    received[0] += len(b)
                    back_hash.update(b)
            except OSError:
                return

        t = threading.Thread(target=reader)
        t.start()
        for chunk in (hello, payload):
            s.sendall(chunk)
            sent_hash.update(chunk)
            out["sent"] += len(chunk)
        s.shutdown(socket.SHUT_WR)
        t.join(timeout * 3)
        s.close()
        out["received"] = received[0]
        out["same"] = out["received"] == out["sent"] and sent_hash.digest() == back_hash.digest()
    except OSError as e:
        out["errno"] = e.errno or errno.EIO
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
