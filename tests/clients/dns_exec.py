#!/usr/bin/env python3
"""Runs one real client (dig, getent, curl, iodine, ...) and reports how it
went as a JSON line, with its wall time.

  dns_exec.py TAG [--timeout SECONDS] [--stdin TEXT] [--stdin-hold SECONDS] -- ARGV...

Prints {"client":"dns_exec","results":[{"marker":TAG,"argv":[..],"status":N,
"ok":status==0,"timed_out":bool,"ms":wall,"out":stdout,"err":stderr}]}.
--stdin TEXT is written to the command's stdin, which is then held open for
--stdin-hold seconds (dns2tcpc exits when its stdin closes) before it is closed.
A command still running at --timeout is killed (SIGTERM, then SIGKILL). It
stays in this process's group (whoever started us can kill the whole group)
and gets PR_SET_PDEATHSIG: it never outlives this wrapper.
"""
import ctypes
import subprocess
import sys
import threading
import time

import alclient


def _die_with_parent():
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except OSError:
        pass


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        raise SystemExit("usage: dns_exec.py TAG [--timeout S] [--stdin TEXT] [--stdin-hold S] -- ARGV...")
    sep = argv.index("--")
    opts, cmd = argv[:sep], argv[sep + 1:]
    tag = opts[0]
    timeout, stdin_text, hold = 10.0, None, 0.0
    i = 1
    while i < len(opts):
        if opts[i] == "--timeout":
            timeout = float(opts[i + 1])
        elif opts[i] == "--stdin":
            stdin_text = opts[i + 1]
        elif opts[i] == "--stdin-hold":
            hold = float(opts[i + 1])
        i += 2
    r = {"marker": tag, "argv": cmd, "timed_out": False}
    t0 = time.monotonic()
    try:
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_die_with_parent)
    except OSError as e:
        r.update(status=127, ok=False, errno=alclient.errname(e), ms=0, out="", err=str(e))
        alclient.emit({"client": "dns_exec", "results": [r]})
        return

    def feed():
        try:
            p.stdin.write(stdin_text.encode())
            p.stdin.flush()
            time.sleep(hold)
            p.stdin.close()
        except OSError:
            pass

    if stdin_text is not None:
        threading.Thread(target=feed, daemon=True).start()
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        r["timed_out"] = True
        for kill in (p.terminate, p.kill):
            try:
                kill()
            except OSError:
                pass
            try:
                out, err = p.communicate(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            out, err = b"", b""
    r["ms"] = round((time.monotonic() - t0) * 1000, 3)
    r["status"] = p.returncode if p.returncode is not None and p.returncode >= 0 else 128 - (p.returncode or 0)
    r["ok"] = r["status"] == 0 and not r["timed_out"]
    r["out"] = out.decode("utf-8", "replace")[-6000:]
    r["err"] = err.decode("utf-8", "replace")[-6000:]
    alclient.emit({"client": "dns_exec", "results": [r]})


if __name__ == "__main__":
    main()
