#!/usr/bin/env python3
"""Sends requests byte for byte as written, over TLS, and says what came back.

  http_raw.py HOST PORT CASES.json OUT.json

CASES.json is a list of {"name": N, "requests": [RAW, ...]}: each case is
one TLS connection (the server name HOST, verified against the default
roots, which SSL_CERT_FILE sets) on which its raw requests (latin-1 text)
are written one after the other, each answer read whole (Content-Length)
before the next is sent (a HEAD's answer has no body). Prints one JSON object: {N: [{"status": S,
"body": TEXT}, ...]}; S is null where no answer came (the connection
closed, or nothing within 5 s), and the case's later requests are not sent.
Between requests a case may hold {"signal": PATH} (the file is made) and
{"wait": PATH} (the file is waited for, 30 s at most): a test acts on the
connection's far side between two requests on it.
The same object is written to OUT.json.
"""
import json
import os
import socket
import ssl
import sys
import time


def read_answer(f, head):
    line = f.readline()
    if not line:
        return None
    parts = line.decode("latin-1").split(" ", 2)
    status = int(parts[1])
    length = 0
    while True:
        h = f.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        k, _, v = h.decode("latin-1").partition(":")
        if k.strip().lower() == "content-length":
            length = int(v.strip())
    body = f.read(length) if length and not head else b""
    return {"status": status, "body": body.decode("utf-8", "replace")}


def step(r):
    if "signal" in r:
        with open(r["signal"], "w", encoding="utf-8"):
            pass
    elif "wait" in r:
        end = time.monotonic() + 30
        while not os.path.exists(r["wait"]) and time.monotonic() < end:
            time.sleep(0.01)


def run_case(host, port, requests):
    out = []
    ctx = ssl.create_default_context()
    with socket.create_connection((host, port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname=host) as s:
            f = s.makefile("rb")
            for r in requests:
                if isinstance(r, dict):
                    step(r)
                    continue
                try:
                    s.sendall(r.encode("latin-1"))
                    a = read_answer(f, r.startswith("HEAD "))
                except (OSError, ValueError, IndexError):
                    a = None
                out.append(a if a else {"status": None, "body": ""})
                if not a:
                    break
    return out


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    with open(sys.argv[3], encoding="utf-8") as f:
        cases = json.load(f)
    result = {}
    for c in cases:
        try:
            result[c["name"]] = run_case(host, port, c["requests"])
        except OSError as e:
            result[c["name"]] = [{"status": None, "body": "connect: " + str(e)}]
    with open(sys.argv[4], "w", encoding="utf-8") as f:
        json.dump(result, f)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
