#!/usr/bin/env python3
"""One violating connect, then the instructions a stopped task must not run.

  stop_client.py --dir D --violation DEST --marker M --allowed DEST2 --allowed-marker M2

1. writes D/pid, waits for D/go;
2. writes D/attempt (CLOCK_MONOTONIC ns, just before the call), then
   connects to DEST and sends M if the connect succeeds;
3. at once writes D/progress with the connect's result: a task the kernel
   stopped (SIGSTOP) or killed (SIGKILL) in that connect never gets here
   until it is resumed;
4. waits for D/thawed, sends M2 over TCP to DEST2, writes D/after.
"""
import argparse
import os
import time

import alclient


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--violation", required=True)
    ap.add_argument("--marker", required=True)
    ap.add_argument("--allowed", required=True)
    ap.add_argument("--allowed-marker", required=True)
    a = ap.parse_args()
    d = a.dir
    alclient.write_json_atomic(os.path.join(d, "pid"), {"pid": os.getpid()})
    if not alclient.wait_for_file(os.path.join(d, "go"), 20.0):
        return 2
    alclient.write_json_atomic(os.path.join(d, "attempt"), {"ns": time.monotonic_ns()})
    r = alclient.tcp_send(a.violation, a.marker.encode())
    alclient.write_json_atomic(os.path.join(d, "progress"), dict(r, ns=time.monotonic_ns()))
    if not alclient.wait_for_file(os.path.join(d, "thawed"), 30.0):
        return 3
    after = alclient.tcp_send(a.allowed, a.allowed_marker.encode())
    alclient.write_json_atomic(os.path.join(d, "after"), after)
    alclient.emit({"client": "stop_client", "violation": r, "after": after})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
