#!/usr/bin/env python3
"""Waits until PATH exists (at most TIMEOUT seconds, default 15).

  wait_file.py PATH [TIMEOUT]

Lets a test sequence sandboxed steps around its own actions (a reload, a
kill). Prints {"client":"wait_file","path":..,"found":bool}.
"""
import sys

import alclient


def main():
    path = sys.argv[1]
    timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 15.0
    alclient.emit({"client": "wait_file", "path": path, "found": alclient.wait_for_file(path, timeout)})


if __name__ == "__main__":
    main()
