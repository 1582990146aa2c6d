#!/usr/bin/env python3
"""Bulk bytes both ways through an SNI gate: resolves NAME (the system's
resolver), connects to it on PORT, sends a real ClientHello naming NAME
(Python's ssl, the handshake never finished), then BYTES bytes of a seeded
pseudo-random stream, while it reads what an echo server sends back.

  gate_echo.py [--timeout S] [--mode end|urgent|reset] NAME PORT BYTES

  end     shuts down its side after the stream and reads to the end
  urgent  the same, with one byte, "!", sent MSG_OOB (TCP urgent data) in
          the middle of the stream, counted in "sent" and expected back
          in its place (an echo server reading it inline)
  reset   once the first 64 KiB came back, closes with SO_LINGER 0 (a
          reset) while the rest is still coming

Prints {"client":"gate_echo","mode","dst","sent":N,"received":N,"same":bool,
"hello":N,"errno":..}: sent counts the ClientHello too; same is whether
what came back is byte for byte what was sent.
"""
import argparse
import errno
import hashlib
import json
import random
import select
import socket
import ssl
import struct
import threading
import time


def client_hello(name):
    ctx = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname=name)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def reset(s, hello, payload, out, timeout):
    """Sends while it reads, one thread (no other holds the socket, so the
    close resets at once), until 64 KiB came back; then the reset."""
    s.setblocking(False)
    data = hello + payload
    at = 0
    deadline = time.monotonic() + timeout
    while out["received"] < 1 << 16 and time.monotonic() < deadline:
        want_write = [s] if at < len(data) else []
        readable, writable, _ = select.select([s], want_write, [], 0.5)
        if readable:
            b = s.recv(1 << 16)
            if not b:
                break
            out["received"] += len(b)
        if writable:
            at += s.send(data[at:at + (1 << 16)])
    out["sent"] = at
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--mode", choices=["end", "urgent", "reset"], default="end")
    ap.add_argument("name")
    ap.add_argument("port", type=int)
    ap.add_argument("bytes", type=int)
    a = ap.parse_args()
    out = {"client": "gate_echo", "mode": a.mode, "dst": "", "sent": 0, "received": 0, "same": False, "hello": 0,
           "errno": 0}
    hello = client_hello(a.name)
    out["hello"] = len(hello)
    payload = random.Random(a.bytes).randbytes(a.bytes)
    sent_hash, back_hash = hashlib.sha256(), hashlib.sha256()
    try:
        ai = socket.getaddrinfo(a.name, a.port, type=socket.SOCK_STREAM)[0]
        out["dst"] = ai[4][0]
        s = socket.socket(ai[0], socket.SOCK_STREAM)
        s.settimeout(a.timeout)
        s.connect(ai[4])
        if a.mode == "reset":
            reset(s, hello, payload, out, a.timeout)
            print(json.dumps(out), flush=True)
            return
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
        half = len(payload) // 2
        parts = [hello, payload] if a.mode != "urgent" else [hello, payload[:half], None, payload[half:]]
        try:
            for chunk in parts:
                if chunk is None:
                    s.send(b"!", socket.MSG_OOB)
                    sent_hash.update(b"!")
                    out["sent"] += 1
                    continue
                s.sendall(chunk)
                sent_hash.update(chunk)
                out["sent"] += len(chunk)
            s.shutdown(socket.SHUT_WR)
        finally:
            t.join(a.timeout * 3)
        s.close()
        out["received"] = received[0]
        out["same"] = out["received"] == out["sent"] and sent_hash.digest() == back_hash.digest()
    except OSError as e:
        out["errno"] = e.errno or errno.EIO
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
