#!/usr/bin/env python3
"""Resolves names with the C library (getaddrinfo, i.e. /etc/resolv.conf),
then connects to the first address once and sends a marker.

  dns_connect.py [--family 4|6|any] [--proto tcp|udp] [--resolve-only]
                 [--wait-for FILE] [--done FILE] [--then-wait FILE]
                 NAME:PORT MARKER [NAME:PORT MARKER ...]

For each pair: getaddrinfo(NAME, PORT) timed in milliseconds, then (unless it
failed or --resolve-only) ONE connect to the first address it returned (no
retries, no other address: a learned address must work on the first try) and
the marker as payload (TCP: connect, send, shut down, wait for the peer's
close; UDP: one sendto).
--wait-for FILE: wait (15 s at most) for FILE before starting.
--done FILE: after the last pair, write the results there (atomically).
--then-wait FILE: after that, wait (20 s at most) for FILE before exiting.
Prints {"client":"dns_connect","results":[{name,port,marker,resolved,
resolve_ms,gai_error,addrs,addr,ok,errno,stage,connect_ms}]}.
"""
import argparse
import socket
import time

import alclient

GAI_NAMES = {getattr(socket, n): n for n in dir(socket) if n.startswith("EAI_")}
FAMILIES = {"4": socket.AF_INET, "6": socket.AF_INET6, "any": socket.AF_UNSPEC}


def one(name, port, marker, family, proto, resolve_only):
    r = {"name": name, "port": port, "marker": marker, "proto": proto, "ok": False, "errno": None,
         "resolved": False, "gai_error": None, "addrs": [], "addr": None}
    socktype = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
    t0 = time.monotonic()
    try:
        infos = socket.getaddrinfo(name, port, family, socktype)
        r["resolved"] = True
    except socket.gaierror as e:
        infos = []
        r["gai_error"] = GAI_NAMES.get(e.errno, str(e.errno))
        r["gai_message"] = str(e)
    except OSError as e:
        infos = []
        r["gai_error"] = alclient.errname(e)
    r["resolve_ms"] = round((time.monotonic() - t0) * 1000, 3)
    r["addrs"] = [i[4][0] for i in infos]
    if not infos:
        r["stage"] = "resolve"
        return r
    if resolve_only:
        r["ok"] = True
        return r
    fam, _, _, _, sa = infos[0]
    r["addr"] = sa[0]
    t1 = time.monotonic()
    s = socket.socket(fam, socktype)
    s.settimeout(3.0)
    try:
        if proto == "tcp":
            r["stage"] = "connect"
            s.connect(sa)
            r["stage"] = "send"
            s.sendall(marker.encode())
            alclient.finish_send(s)
        else:
            r["stage"] = "sendto"
            s.sendto(marker.encode(), sa)
        r.update(ok=True, stage="done")
    except OSError as e:
        r["errno"] = alclient.errname(e)
    finally:
        s.close()
    r["connect_ms"] = round((time.monotonic() - t1) * 1000, 3)
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", default="4", choices=sorted(FAMILIES))
    ap.add_argument("--proto", default="tcp", choices=["tcp", "udp"])
    ap.add_argument("--resolve-only", action="store_true")
    ap.add_argument("--wait-for")
    ap.add_argument("--done")
    ap.add_argument("--then-wait")
    ap.add_argument("items", nargs="*")
    a = ap.parse_args()
    out = {"client": "dns_connect"}
    if a.wait_for:
        out["waited"] = alclient.wait_for_file(a.wait_for, 15.0)
    results = []
    for dest, marker in alclient.pairs(a.items):
        name, _, port = dest.rpartition(":")
        results.append(one(name, int(port), marker, FAMILIES[a.family], a.proto, a.resolve_only))
    out["results"] = results
    alclient.emit(out)
    if a.done:
        alclient.write_json_atomic(a.done, out)
    if a.then_wait:
        alclient.wait_for_file(a.then_wait, 20.0)


if __name__ == "__main__":
    main()
