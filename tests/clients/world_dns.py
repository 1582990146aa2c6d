#!/usr/bin/env python3
"""DNS in a world that synthesizes it, as applications meet it.

  world_dns.py NAME RESOLVER4 RESOLVER6 MARKER

1. glibc's getaddrinfo(NAME) over /etc/resolv.conf (a connected UDP socket;
   glibc drops an answer whose source is not the server it asked);
2. an A query for NAME sent with sendto() from an unconnected IPv4 socket
   to RESOLVER4:53, an IPv6 socket to ::ffff:RESOLVER4, and one to
   [RESOLVER6]:53: what recvfrom() says the answer came from, and the
   address in it;
3. an HTTP GET http://NAME/MARKER through urllib (getaddrinfo again).

Prints {"client":"world_dns","getaddrinfo":[...],"raw":[{to,from,
from_port,answer}],"http":{status,body,peer}}; an error is {"error": "..."}
in place of the step's result.
"""
import json
import socket
import struct
import sys
import urllib.request


def query(name, qid):
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    return q + b"\x00" + struct.pack(">HH", 1, 1)


def first_a(answer, question_len):
    # Header, the question, then the first answer: name (2-byte pointer),
    # type, class, ttl, rdlength, rdata.
    at = 12 + question_len
    if len(answer) < at + 16:
        return None
    rtype, _, _, rdlen = struct.unpack(">HHIH", answer[at + 2:at + 12])
    if rtype != 1 or rdlen != 4:
        return None
    return socket.inet_ntoa(answer[at + 12:at + 16])


def raw(name, family, to, qid):
    r = {"to": to}
    try:
        s = socket.socket(family, socket.SOCK_DGRAM)
        s.settimeout(5)
        q = query(name, qid)
        s.sendto(q, (to, 53))
        data, src = s.recvfrom(4096)
        r.update(**{"from": src[0], "from_port": src[1], "answer": first_a(data, len(q) - 12),
                    "id": struct.unpack(">H", data[:2])[0]})
    except OSError as e:
        r["error"] = "%s: %s" % (type(e).__name__, e)
    return r


def main():
    name, r4, r6, marker = sys.argv[1:5]
    out = {"client": "world_dns"}
    try:
        infos = socket.getaddrinfo(name, 80, socket.AF_INET, socket.SOCK_STREAM)
        out["getaddrinfo"] = sorted({i[4][0] for i in infos})
    except OSError as e:
        out["getaddrinfo"] = {"error": "%s: %s" % (type(e).__name__, e)}
    out["raw"] = [
        raw(name, socket.AF_INET, r4, 0x1111),
        raw(name, socket.AF_INET6, "::ffff:" + r4, 0x2222),
        raw(name, socket.AF_INET6, r6, 0x3333),
    ]
    try:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open("http://%s/%s" % (name, marker), timeout=5) as resp:
            out["http"] = {"status": resp.status, "body": resp.read().decode(errors="replace")}
    except Exception as e:  # noqa: BLE001 - reported, not raised
        out["http"] = {"error": "%s: %s" % (type(e).__name__, e)}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
