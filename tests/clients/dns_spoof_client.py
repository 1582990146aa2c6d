#!/usr/bin/env python3
"""The victim side of the spoofing tests: asks a resolver one question on an
UNCONNECTED UDP socket (so that the socket layer itself would take an answer
from any source), records every datagram the socket receives, then tries a
TCP connect to the address the answer would have taught.

  dns_spoof_client.py --server 10.77.0.54 --name spoof.allowed.test
                      [--type A] [--wait 1.0] [--unsolicited TRIGGER_DIR]
                      --connect 10.77.0.2:9000 --marker M

--unsolicited DIR: send no query; write DIR/<port>.json asking the fake
resolver to send an answer to this socket's port, wait until it says it has
sent it (DIR/<port>.json.sent), then listen for --wait seconds.
Prints {"client":"dns_spoof_client","sport":N,"query_id":N,"sent":{..},
"received":[{src,sport,id,questions,addrs,error}],"results":[{marker,ok,
errno,...}]} (the results entry is the connect).
"""
import argparse
import os
import select
import socket
import time

import alclient
import dns_common as d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default="10.77.0.54")
    ap.add_argument("--port", type=int, default=53)
    ap.add_argument("--name", default="spoof.allowed.test")
    ap.add_argument("--type", default="A")
    ap.add_argument("--wait", type=float, default=1.0)
    ap.add_argument("--unsolicited")
    ap.add_argument("--connect", required=True)
    ap.add_argument("--marker", required=True)
    a = ap.parse_args()

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 0))
    sport = s.getsockname()[1]
    qid = int.from_bytes(os.urandom(2), "big")
    out = {"client": "dns_spoof_client", "sport": sport, "query_id": qid, "name": a.name}
    if a.unsolicited:
        trig = os.path.join(a.unsolicited, "%d.json" % sport)
        alclient.write_json_atomic(trig, {"dst": "10.77.0.1", "port": sport, "name": a.name, "id": qid})
        out["trigger"] = trig
        out["resolver_sent"] = alclient.wait_for_file(trig + ".sent", 5.0)
        out["sent"] = {"ok": None}
    else:
        try:
            s.sendto(d.build_query(a.name, a.type, qid), (a.server, a.port))
            out["sent"] = {"ok": True, "errno": None}
        except OSError as e:
            out["sent"] = {"ok": False, "errno": alclient.errname(e)}
    received = []
    deadline = time.monotonic() + a.wait
    while time.monotonic() < deadline:
        rd, _, _ = select.select([s], [], [], max(0.0, deadline - time.monotonic()))
        if not rd:
            break
        try:
            data, src = s.recvfrom(65535)
        except OSError as e:
            received.append({"errno": alclient.errname(e)})
            break
        p = d.parse(data)
        received.append({"src": src[0], "sport": src[1], "id": p.get("id"), "questions": p.get("questions"),
                         "addrs": d.addresses(p), "error": p.get("error"), "ms": round(
                             (time.monotonic() - (deadline - a.wait)) * 1000, 3)})
        if p.get("id") == qid and d.addresses(p):
            break  # an answer to our question: connect at once
    s.close()
    out["received"] = received
    r = alclient.tcp_send(a.connect, a.marker.encode())
    r["marker"] = a.marker
    out["results"] = [r]
    alclient.emit(out)


if __name__ == "__main__":
    main()
