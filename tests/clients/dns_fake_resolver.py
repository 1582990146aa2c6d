#!/usr/bin/env python3
"""A lying DNS server for the spoofing tests. Runs in the sink namespace.

  dns_fake_resolver.py --addr 10.77.0.54 --other 10.77.0.2 --log FILE
                       --ready FILE [--mode MODE] [--mode-file FILE]
                       [--trigger-dir DIR] [--answer4 10.77.0.2]
                       [--answer6 fd77::2] [--ttl 60]
                       [--other-name other.allowed.test]

Listens on UDP ADDR:53 (the "resolver") and OTHER:53 (another host of the
sink). Every datagram received on either is logged. A query to ADDR:53 is
answered according to the mode (read from --mode-file at each query when that
file exists, else --mode):
  good               correct ID, question echoed, A answer4 / AAAA answer6, TTL --ttl
  wrong-id           as good, with another ID
  wrong-name         question and answer for --other-name
  from-other-source  as good, but sent from OTHER:53
  silent             no answer
  extra              as good (A answer4), plus an A record extra4 owned by
                     evil.example.
  extra-allowed      as good, plus an A record extra4 owned by --other-name
  chain              QNAME CNAME mid.elsewhere.test CNAME end.elsewhere.test,
                     A extra4 on end; owners and targets compressed, the
                     letter case of the owners changed
Names nK.race.<anything> are answered with 10.77.0.(--race-base + K) instead
of answer4 (a fresh address per name: each answer must be learned anew).
A query to OTHER:53 is answered like "good", from OTHER:53.
Unsolicited answers: for every FILE.json that appears in --trigger-dir,
{"dst":ADDR,"port":N,"name":NAME,"id":N}, an answer (A answer4) is sent from
ADDR:53 to dst:port without any query, logged, and FILE.json.sent is created.
Log lines (JSON): {"kind":"query"|"answer"|"unsolicited"|"error",...}.
Exits after --max-seconds (default 300).
"""
import argparse
import json
import os
import re
import selectors
import socket
import time

import dns_common as d

RACE = re.compile(r"^n(\d+)\.race\.")


class Fake:
    def __init__(self, a):
        self.a = a
        self.log_fd = os.open(a.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        self.sel = selectors.DefaultSelector()
        self.main = self.bind(a.addr)
        self.other = self.bind(a.other) if a.other else None
        self.seen = set()

    def bind(self, addr):
        fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, self.a.port))
        s.setblocking(False)
        self.sel.register(s, selectors.EVENT_READ, addr)
        return s

    def log(self, rec):
        rec["t"] = time.time()
        os.write(self.log_fd, (json.dumps(rec, separators=(",", ":")) + "\n").encode())

    def mode(self):
        if self.a.mode_file:
            try:
                with open(self.a.mode_file) as f:
                    m = f.read().strip()
                    if m:
                        return m
            except OSError:
                pass
        return self.a.mode

    def records(self, qtype, qname=""):
        if qtype == "A":
            m = RACE.match(qname.lower())
            addr = "10.77.0.%d" % (self.a.race_base + int(m.group(1))) if m else self.a.answer4
            return [("A", self.a.ttl, d.a_rdata(addr))]
        if qtype == "AAAA":
            return [("AAAA", self.a.ttl, d.aaaa_rdata(self.a.answer6))]
        return []

    def crafted(self, mode, qid, qname):
        """Answers whose records are not all owned by the question."""
        ttl, a4, x4 = self.a.ttl, d.a_rdata(self.a.answer4), d.a_rdata(self.a.extra4)
        if mode in ("extra", "extra-allowed"):
            other = "evil.example" if mode == "extra" else self.a.other_name
            recs = d.rr(b"\xc0\x0c", 1, ttl, a4) + d.rr(d.encode_name(other), 1, ttl, x4)
            return d.header(qid, d.FLAG_QR | d.FLAG_RD | d.FLAG_RA, 1, 2) + d.question(qname, "A") + recs
        # chain: offsets are fixed by the question's length.
        msg = d.header(qid, d.FLAG_QR | d.FLAG_RD | d.FLAG_RA, 1, 3) + d.question(qname, "A")
        t1 = len(msg) + 2 + 10  # first target: after a pointer owner and the fixed part
        msg += d.rr(b"\xc0\x0c", 5, ttl, b"\x03MID\x09elsewhere\x04test\x00")
        t2 = len(msg) + 2 + 10
        msg += d.rr(bytes([0xC0 | (t1 >> 8), t1 & 0xFF]), 5, ttl, b"\x03end" + bytes([0xC0 | ((t1 + 4) >> 8), (t1 + 4) & 0xFF]))
        msg += d.rr(b"\x03EnD" + bytes([0xC0 | ((t1 + 4) >> 8), (t1 + 4) & 0xFF]), 1, ttl, x4)
        return msg

    def send(self, sock, data, dst, kind, extra):
        try:
            sock.sendto(data, dst)
            rec = {"kind": kind, "from": sock.getsockname()[0], "dst": dst[0], "dport": dst[1], "hex": data.hex()}
        except OSError as e:
            rec = {"kind": "error", "where": kind, "errno": e.errno, "dst": dst[0], "dport": dst[1]}
        rec.update(extra)
        self.log(rec)

    def on_query(self, sock, to_addr):
        while True:
            try:
                data, src = sock.recvfrom(65535)
            except (BlockingIOError, InterruptedError):
                return
            p = d.parse(data)
            q = (p.get("questions") or [{}])[0]
            mode = self.mode() if sock is self.main else "good"
            self.log({"kind": "query", "to": to_addr, "src": src[0], "sport": src[1], "id": p.get("id"),
                      "qname": q.get("name"), "qtype": q.get("type"), "mode": mode, "error": p.get("error"),
                      "hex": data.hex()})
            if "error" in p or p.get("qr") or not q or mode == "silent":
                continue
            qid, qname, qtype = p["id"], q["name"], q["type"]
            out_sock = sock
            if mode == "wrong-id":
                qid ^= 0x5A5A
            elif mode == "wrong-name":
                qname = self.a.other_name
            elif mode == "from-other-source":
                out_sock = self.other
            elif mode in ("extra", "extra-allowed", "chain") and qtype == "A":
                ans = self.crafted(mode, qid, qname)
                self.send(out_sock, ans, src, "answer", {"mode": mode, "id": qid, "qname": qname, "qtype": qtype,
                                                        "query_id": p["id"], "query_name": q["name"]})
                continue
            elif mode != "good":
                continue
            ans = d.build_answer(qid, qname, qtype, self.records(qtype, qname))
            self.send(out_sock, ans, src, "answer", {"mode": mode, "id": qid, "qname": qname, "qtype": qtype,
                                                    "query_id": p["id"], "query_name": q["name"]})

    def check_triggers(self):
        tdir = self.a.trigger_dir
        if not tdir:
            return
        try:
            names = sorted(os.listdir(tdir))
        except OSError:
            return
        for n in names:
            if not n.endswith(".json") or n in self.seen:
                continue
            path = os.path.join(tdir, n)
            try:
                with open(path) as f:
                    t = json.load(f)
            except (OSError, ValueError):
                continue  # not complete yet: next round
            self.seen.add(n)
            qid = int(t.get("id", 0x4242))
            name = t.get("name", "unsolicited.allowed.test")
            ans = d.build_answer(qid, name, "A", self.records("A"))
            self.send(self.main, ans, (t["dst"], int(t["port"])), "unsolicited", {"id": qid, "qname": name})
            with open(path + ".sent", "w") as f:
                f.write("sent\n")

    def run(self):
        with open(self.a.ready, "w") as f:
            f.write("ready\n")
        deadline = time.monotonic() + self.a.max_seconds
        while time.monotonic() < deadline:
            for key, _ in self.sel.select(timeout=0.01):
                self.on_query(key.fileobj, key.data)
            self.check_triggers()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", default="10.77.0.54")
    ap.add_argument("--other", default="10.77.0.2")
    ap.add_argument("--port", type=int, default=53)
    ap.add_argument("--log", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--mode", default="good")
    ap.add_argument("--mode-file")
    ap.add_argument("--trigger-dir")
    ap.add_argument("--answer4", default="10.77.0.2")
    ap.add_argument("--answer6", default="fd77::2")
    ap.add_argument("--extra4", default="10.77.0.3")
    ap.add_argument("--ttl", type=int, default=60)
    ap.add_argument("--other-name", default="other.allowed.test")
    ap.add_argument("--race-base", type=int, default=100)
    ap.add_argument("--max-seconds", type=float, default=300)
    Fake(ap.parse_args()).run()


if __name__ == "__main__":
    main()
