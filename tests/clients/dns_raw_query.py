#!/usr/bin/env python3
"""Sends DNS datagrams built byte by byte, one socket per datagram, and
reports what the kernel did to each send and whether an answer came back.

  dns_raw_query.py [--server ADDR] [--port 53] [--wait SECONDS] [--connect]
                   [--tcp] SPECS_JSON

SPECS_JSON is a JSON array of objects (optionally prefixed "json:", which
keeps an argument parser from taking "[a,b]" for a list of its own):
  {"case": CASE, "name": "x.allowed.test", "type": "A", "marker": M,
   "id": N, "edns": bool}
CASE is one of
  query               a well-formed query (optionally with EDNS0 "edns": true,
                      an OPT record with a cookie, as dig sends it)
  ptr                 the QNAME's last label is a compression pointer (to offset 12)
  label-overrun       after the name's labels, a length byte of 63 with 3 bytes left
  reserved-label      a label length byte 0x41 (the reserved 01 label type)
  two-questions       QDCOUNT 2: NAME and allowed.test
  zero-questions      QDCOUNT 0, header only
  qr                  QR=1 (a response sent to the resolver)
  opcode              opcode "opcode" (default 1, IQUERY)
  trailing            a well-formed query followed by garbage bytes
  trailing-after-opt  a query with an OPT record, followed by garbage
  short-header        the first 7 bytes of a header
  empty               a 0-byte datagram
  hex                 the bytes of "hex"
The socket is bound first (0.0.0.0:0 or [::]:0), so the source port ("sport")
is known even when the send fails: a test can look for any frame from it.
--tcp sends the message over TCP with its 2-byte length prefix.
Prints {"client":"dns_raw_query","results":[{case,marker,sport,ok,errno,
stage,send_ms,t,answered,answer}]}; "ok" means the send succeeded; "t" is
when the send started, in seconds since the client started.
"""
import argparse
import json
import os
import select
import socket
import struct
import time

import alclient
import dns_common as d

T_START = time.monotonic()


def build(spec):
    case = spec.get("case", "query")
    name = spec.get("name", "allowed.test")
    qtype = spec.get("type", "A")
    qid = spec.get("id", int.from_bytes(os.urandom(2), "big"))
    if case == "query":
        return d.build_query(name, qtype, qid, edns=spec.get("edns", False),
                             cookie=os.urandom(8) if spec.get("edns") else None)
    if case == "ptr":
        return d.header(qid) + d.encode_name(name, terminate=False) + b"\xc0\x0c" + struct.pack("!HH", d.qtype_code(qtype), 1)
    if case == "label-overrun":
        return d.header(qid) + d.encode_name(name, terminate=False) + b"\x3fabc"
    if case == "reserved-label":
        return d.header(qid) + d.encode_name(name, terminate=False) + b"\x41" + b"x" * 8 + b"\x00" + struct.pack("!HH", d.qtype_code(qtype), 1)
    if case == "two-questions":
        return d.header(qid, qd=2) + d.question(name, qtype) + d.question("allowed.test", "A")
    if case == "zero-questions":
        return d.header(qid, qd=0)
    if case == "qr":
        return d.header(qid, d.FLAG_QR | d.FLAG_RD) + d.question(name, qtype)
    if case == "opcode":
        op = spec.get("opcode", 1)
        return d.header(qid, (op << 11) | d.FLAG_RD) + d.question(name, qtype)
    if case == "trailing":
        return d.build_query(name, qtype, qid) + b"GARBAGE-AFTER-THE-QUESTION"
    if case == "trailing-after-opt":
        return d.build_query(name, qtype, qid, edns=True) + b"GARBAGE-AFTER-THE-OPT"
    if case == "short-header":
        return d.header(qid)[:7]
    if case == "empty":
        return b""
    if case == "hex":
        return bytes.fromhex(spec["hex"])
    raise SystemExit("unknown case " + case)


def one(spec, server, port, wait, connect, tcp):
    fam = socket.AF_INET6 if ":" in server else socket.AF_INET
    payload = build(spec)
    r = {"case": spec.get("case", "query"), "marker": spec.get("marker"), "name": spec.get("name"),
         "type": spec.get("type", "A"), "dst": server, "port": port, "len": len(payload),
         "answered": False, "sport": None}
    s = socket.socket(fam, socket.SOCK_STREAM if tcp else socket.SOCK_DGRAM)
    try:
        s.bind(("::" if fam == socket.AF_INET6 else "0.0.0.0", 0))
        r["sport"] = s.getsockname()[1]
        t0 = time.monotonic()
        r["t"] = round(t0 - T_START, 6)
        stage = "connect" if (connect or tcp) else "sendto"
        try:
            if tcp:
                s.settimeout(3)
                s.connect((server, port))
                stage = "send"
                s.sendall(struct.pack("!H", len(payload)) + payload)
            elif connect:
                s.connect((server, port))
                stage = "send"
                s.send(payload)
            else:
                s.sendto(payload, (server, port))
            r.update(ok=True, errno=None)
        except OSError as e:
            r.update(ok=False, errno=alclient.errname(e), stage=stage)
        r["send_ms"] = round((time.monotonic() - t0) * 1000, 3)
        if r["ok"] and wait > 0:
            deadline = time.monotonic() + wait
            buf = b""
            while time.monotonic() < deadline:
                rd, _, _ = select.select([s], [], [], max(0.0, deadline - time.monotonic()))
                if not rd:
                    break
                try:
                    if tcp:
                        chunk = s.recv(65535)
                        if not chunk:
                            break
                        buf += chunk
                        if len(buf) >= 2 and len(buf) >= 2 + struct.unpack("!H", buf[:2])[0]:
                            data = buf[2:2 + struct.unpack("!H", buf[:2])[0]]
                        else:
                            continue
                        src = (server, port)
                    else:
                        data, src = s.recvfrom(65535)
                except OSError as e:
                    r["recv_errno"] = alclient.errname(e)
                    break
                r["answered"] = True
                p = d.parse(data)
                r["answer"] = {"src": src[0], "sport": src[1], "id": p.get("id"), "rcode": p.get("rcode"),
                               "questions": p.get("questions"), "addrs": d.addresses(p),
                               "pointers": p.get("pointers"), "error": p.get("error"), "hex": data.hex()}
                break
    finally:
        s.close()
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default="10.77.0.53")
    ap.add_argument("--port", type=int, default=53)
    ap.add_argument("--wait", type=float, default=0.5, help="seconds to wait for an answer")
    ap.add_argument("--connect", action="store_true", help="connect() the UDP socket, then send()")
    ap.add_argument("--tcp", action="store_true")
    ap.add_argument("specs")
    a = ap.parse_args()
    text = a.specs[5:] if a.specs.startswith("json:") else a.specs
    results = [one(spec, a.server, a.port, a.wait, a.connect, a.tcp) for spec in json.loads(text)]
    alclient.emit({"client": "dns_raw_query", "results": results})


if __name__ == "__main__":
    main()
