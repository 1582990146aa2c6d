#!/usr/bin/env python3
"""A daemon that outlives the command: double fork + setsid.

  daemon.py --report FILE [--linger SECONDS] DEST MARKER [DEST MARKER ...]

The grandchild (session leader's child, reparented away from the command)
makes one TCP connection per DEST MARKER pair, writes {"pid","sid","results"}
to FILE (atomically), then lingers. The command waits for the report (up to
10 s), prints it and exits 0, leaving the daemon behind: `airlock run` must
kill it when the command exits.
Prints {"client":"daemon","daemon_pid":N,"report":{..}} or {"error":..}.
"""
import argparse
import os
import sys
import time

import alclient


def daemon(a):
    items = alclient.pairs(a.items)
    results = []
    for dest, marker in items:
        r = alclient.tcp_send(dest, marker.encode())
        r["marker"] = marker
        results.append(r)
    alclient.write_json_atomic(a.report, {"pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0),
                                          "results": results})
    time.sleep(a.linger)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--report", required=True)
    ap.add_argument("--linger", type=float, default=60.0)
    ap.add_argument("items", nargs="+")
    a = ap.parse_args()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        # The daemon: no stdio of the command's.
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        try:
            daemon(a)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    if not alclient.wait_for_file(a.report, 10.0):
        alclient.emit({"client": "daemon", "error": "no report within 10 s"})
        return
    import json
    with open(a.report) as f:
        report = json.load(f)
    alclient.emit({"client": "daemon", "daemon_pid": report["pid"], "report": report})


if __name__ == "__main__":
    main()
