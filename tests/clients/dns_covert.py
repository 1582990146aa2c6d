#!/usr/bin/env python3
"""The bits an allowed query can still carry: encodes a payload into the
letter case of an allowed name, the query ID and an 8-byte EDNS client
cookie, and sends it to the resolver as fast as the kernel lets it (a send
refused with EPERM is retried with the same chunk: what gets out is exactly
the budget's rate).

  dns_covert.py --server 10.77.0.54 --name covert.allowed.test
                --seconds 4 --seed N

The payload is random.Random(seed) bits; chunk k holds bits
[k*B, (k+1)*B) with B = 16 + letters + 64, in that order: ID (big-endian),
one bit per letter of the name (1: upper case), the cookie.
Prints {"client":"dns_covert","sent":N,"refused":N,"seconds":S,
"bits_per_query":B,"letters":L}.

  dns_covert.py --decode FAKE_RESOLVER_LOG --name ... --seed N

The receiving end: reads the queries the fake resolver logged (in arrival
order), decodes ID, letter case and cookie, and counts the chunks that match
the payload in order. Prints {"client":"dns_covert_decode","queries":N,
"decoded":N,"bits":N,"first_t":T,"last_t":T}.
"""
import json
import argparse
import random
import socket
import struct
import time

import alclient
import dns_common as d


def chunks(name, seed):
    letters = sum(c.isalpha() for c in name)
    bits_per = 16 + letters + 64
    rng = random.Random(seed)
    while True:
        v = rng.getrandbits(bits_per)
        bits = [(v >> (bits_per - 1 - i)) & 1 for i in range(bits_per)]
        qid = int("".join(map(str, bits[:16])), 2)
        case = iter(bits[16:16 + letters])
        cased = "".join((c.upper() if next(case) else c.lower()) if c.isalpha() else c for c in name)
        cookie = int("".join(map(str, bits[16 + letters:])), 2).to_bytes(8, "big")
        yield qid, cased, cookie


def decode(a):
    gen = chunks(a.name, a.seed)
    want = next(gen)
    queries = decoded = 0
    first_t = last_t = None
    with open(a.decode) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("kind") != "query" or not rec.get("hex"):
                continue
            msg = bytes.fromhex(rec["hex"])
            p = d.parse(msg)
            q = (p.get("questions") or [{}])[0]
            if str(q.get("name", "")).lower().rstrip(".") != a.name.lower():
                continue
            queries += 1
            first_t = rec["t"] if first_t is None else first_t
            last_t = rec["t"]
            qid = struct.unpack("!H", msg[:2])[0]
            # The name as sent, case kept: the labels after the header.
            off, labels = 12, []
            while msg[off]:
                labels.append(msg[off + 1:off + 1 + msg[off]].decode())
                off += 1 + msg[off]
            got = (qid, ".".join(labels), msg[-8:])
            if got == want:
                decoded += 1
                want = next(gen)
    letters = sum(c.isalpha() for c in a.name)
    alclient.emit({"client": "dns_covert_decode", "queries": queries, "decoded": decoded,
                   "bits": decoded * (16 + letters + 64), "first_t": first_t, "last_t": last_t})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--decode")
    ap.add_argument("--server", default="10.77.0.54")
    ap.add_argument("--name", required=True)
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if a.decode:
        decode(a)
        return
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setblocking(False)
    sent = refused = 0
    gen = chunks(a.name, a.seed)
    cur = next(gen)
    t0 = time.monotonic()
    while time.monotonic() - t0 < a.seconds:
        qid, cased, cookie = cur
        msg = d.build_query(cased, "A", qid, edns=True, cookie=cookie)
        try:
            s.sendto(msg, (a.server, 53))
            sent += 1
            cur = next(gen)
        except BlockingIOError:
            time.sleep(0.0005)
        except OSError:
            refused += 1
            time.sleep(0.0005)
        try:
            while True:
                s.recv(4096)  # answers: read and forget
        except OSError:
            pass
    letters = sum(c.isalpha() for c in a.name)
    alclient.emit({"client": "dns_covert", "sent": sent, "refused": refused,
                   "seconds": round(time.monotonic() - t0, 3), "bits_per_query": 16 + letters + 64,
                   "letters": letters})


if __name__ == "__main__":
    main()
