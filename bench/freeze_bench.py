#!/usr/bin/env python3
"""Freeze latency and stop-in-call latency (scripts/bench_freeze.sh).

Each trial is one `airlock run --standalone` (on_violation freeze) of
bench/violate as nobody, which makes one denied TCP connect to loopback
either at once after it starts ("at once") or 100 ms later ("100 ms").
Measured per trial:
  - violation -> frozen: the `frozen` line's latency_us in the audit log
    (from the kernel's timestamp of the violation to the agent reading
    `frozen 1` in cgroup.events);
  - violating call -> task stopped (100 ms case only, where the stopwatch is
    already polling): from the client's clock just before connect() to the
    first read of /proc/PID/stat that shows state T (bench/stopwatch).
Then `airlock kill` ends the sandbox.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def pct(xs, p):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = max(0, min(len(xs) - 1, int(round(p / 100.0 * len(xs) + 0.5)) - 1))
    return xs[k]


def frozen_latency(log, name, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open(log) as f:
                for line in f:
                    if name in line:
                        j = json.loads(line)
                        if j.get("sandbox") == name and j.get("event") in ("frozen", "freeze-failed"):
                            return j.get("latency_us"), j.get("event")
        except FileNotFoundError:
            pass
        time.sleep(0.002)
    return None, "timeout"


def command_of(pid, timeout=5.0):
    """The sandboxed command: the runner's deepest descendant once it runs
    bench/violate (between them: the launch's fork and airlock's init)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        p = pid
        try:
            while True:
                with open("/proc/%d/task/%d/children" % (p, p)) as f:
                    kids = f.read().split()
                if not kids:
                    break
                p = int(kids[0])
            with open("/proc/%d/comm" % p) as f:
                if p != pid and f.read().strip() == "violate":
                    return p
        except (FileNotFoundError, ProcessLookupError):
            pass
        time.sleep(0.0005)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--airlock", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    label = a.label or "run"
    bpf = "/sys/fs/bpf/airlock-bench-freeze-" + label
    base = [a.airlock, "--bpf-dir", bpf, "--state-dir", os.path.join(a.work, "state-" + label),
            "--cgroup-parent", "airlock-bench-freeze-" + label]
    policy = os.path.join(a.work, "freeze.json")
    logdir = os.path.join(a.work, "logs-" + label)
    os.makedirs(logdir, exist_ok=True)
    log = os.path.join(logdir, "audit.jsonl")
    rundir = os.path.join(a.work, "run-" + label)
    os.makedirs(rundir, mode=0o777, exist_ok=True)
    os.chmod(rundir, 0o777)
    # Stop-in-call latency only where this build on this kernel stops the
    # task: its decision lines say so (the first case's trials come first).
    def stops():
        try:
            return '"in_call":"stopped"' in open(log).read()
        except FileNotFoundError:
            return False
    results = {}
    for case, delay in (("at once", 0), ("100 ms", 100)):
        freeze, stop, failed, unseen = [], [], 0, 0
        stopping = delay > 0 and stops()
        for i in range(a.trials):
            name = "fz%d-%d" % (delay, i)
            attempt = os.path.join(rundir, name + ".attempt")
            runner = subprocess.Popen(
                base + ["run", "--standalone", "--policy", policy, "--name", name, "--audit-log", log,
                        "--user", "nobody", "--", os.path.join(a.work, "violate"), str(delay), "127.0.0.9", "9",
                        attempt],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            watch = None
            if stopping:
                kid = command_of(runner.pid)
                if kid:
                    watch = subprocess.Popen([os.path.join(a.work, "stopwatch"), str(kid), attempt, "5000"],
                                             stdout=subprocess.PIPE, text=True)
            lat, ev = frozen_latency(log, name)
            if lat is None or ev != "frozen":
                failed += 1
            else:
                freeze.append(lat / 1000.0)
            if watch:
                out = watch.communicate(timeout=10)[0].strip()
                if out and out != "none":
                    stop.append(float(out))
                else:
                    unseen += 1
            subprocess.run(base + ["kill", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                runner.wait(timeout=10)
            except subprocess.TimeoutExpired:
                runner.kill()
                runner.wait()
                raise SystemExit("%s: the runner did not exit after airlock kill" % name)
        results[case] = (freeze, stop, failed, unseen)
    tag = (a.label + ": ") if a.label else ""
    for case, (freeze, stop, failed, unseen) in results.items():
        print("%sviolation -> frozen 1, violation %s after start: n=%d p50 %.2f ms p99 %.2f ms max %.2f ms%s" % (
            tag, case, len(freeze), pct(freeze, 50), pct(freeze, 99), max(freeze) if freeze else float("nan"),
            (", %d trials not frozen" % failed) if failed else ""))
        if stop:
            print("%sviolating call -> task stopped (state T), %s: n=%d p50 %.0f us p99 %.0f us max %.0f us%s" % (
                tag, case, len(stop), pct(stop, 50), pct(stop, 99), max(stop),
                (", %d trials never seen in state T (frozen before the stop)" % unseen) if unseen else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
