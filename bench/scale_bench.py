#!/usr/bin/env python3
"""Many sandboxes under one daemon: see scripts/bench_scale.sh.

Everything it makes (daemon, pins, cgroups, state) is its own and is removed
at the end, also on failure. Traffic stays on loopback.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

BPF_DIR = "/sys/fs/bpf/airlock-scale"
PARENT = "airlock-scale"


def cgroup2_mount():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split()[0] == "cgroup2":
                return left.split()[4]
    raise SystemExit("no cgroup2 mount")


class World:
    def __init__(self, args):
        self.args = args
        self.state = os.path.join(args.work, "state")
        self.audit = os.path.join(args.work, "audit.jsonl")
        self.base = [os.path.abspath("build/airlock"), "--bpf-dir", BPF_DIR, "--state-dir", self.state,
                     "--cgroup-parent", PARENT]
        self.daemon = None

    def airlock(self, *a, check=True):
        r = subprocess.run(self.base + list(a), capture_output=True, text=True, timeout=120)
        if check and r.returncode != 0:
            raise SystemExit(f"airlock {' '.join(a)}: exit {r.returncode}: {r.stderr.strip()}")
        return r

    def start_daemon(self):
        self.daemon_err = open(os.path.join(self.args.work, "daemon.err"), "w")
        self.daemon = subprocess.Popen(self.base + ["daemon", "--metrics", "off", "--audit-log", self.audit],
                                       stderr=self.daemon_err, stdout=subprocess.DEVNULL)
        sock = os.path.join(self.state, "control.sock")
        for _ in range(200):
            if os.path.exists(sock) and self.airlock("status", check=False).returncode == 0:
                return
            time.sleep(0.05)
        raise SystemExit("the daemon did not start")

    def cleanup(self):
        if self.daemon and self.daemon.poll() is None:
            st = self.airlock("status", "--json", check=False)
            if st.returncode == 0:
                for s in json.loads(st.stdout)["sandboxes"]:
                    self.airlock("sandbox", "delete", s["name"], check=False)
            self.daemon.send_signal(signal.SIGTERM)
            self.daemon.wait(10)
        subprocess.run(["rm", "-rf", BPF_DIR])
        try:
            os.rmdir(os.path.join(cgroup2_mount(), PARENT))
        except OSError:
            pass


def map_memlock():
    """Bytes of kernel memory charged to airlock's maps (names start al_)."""
    out = subprocess.run(["bpftool", "-j", "map", "show"], capture_output=True, text=True, check=True).stdout
    return sum(m.get("bytes_memlock", 0) for m in json.loads(out) if m.get("name", "").startswith("al_"))


def proc_rss_kib(pid, field="RssAnon:"):
    """RssAnon: the daemon's own memory. VmRSS also counts each ring buffer's
    pages, mapped twice (the kernel's pages, charged to the map already)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(w, label, probe):
    a = w.args
    rounds = []
    for _ in range(a.rounds):
        r = w.airlock("exec", probe, "--", a.bench, str(a.calls))
        rounds.append(json.loads(r.stdout))
    t0 = time.monotonic()
    w.airlock("status")
    status_ms = (time.monotonic() - t0) * 1000
    cpu0, t0 = proc_cpu_s(w.daemon.pid), time.monotonic()
    time.sleep(a.idle)
    idle_cpu = (proc_cpu_s(w.daemon.pid) - cpu0) / (time.monotonic() - t0)
    row = {
        "label": label,
        "tcp_connect_ns": statistics.median(r["tcp_connect_ns"] for r in rounds),
        "udp_sendto_ns": statistics.median(r["udp_sendto_ns"] for r in rounds),
        "map_memlock_bytes": map_memlock(),
        "daemon_rss_anon_kib": proc_rss_kib(w.daemon.pid),
        "daemon_vm_rss_kib": proc_rss_kib(w.daemon.pid, "VmRSS:"),
        "daemon_idle_cpu_percent": round(idle_cpu * 100, 2),
        "status_ms": round(status_ms, 1),
    }
    print(json.dumps(row), flush=True)
    return row


def freeze_latency_us(w, name):
    """A violation in sandbox `name` (policy: freeze); the daemon's latency."""
    p = subprocess.Popen(w.base + ["exec", name, "--", "python3", "-c",
                                   "import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                                   "s.sendto(b'x', ('127.0.0.2', 9))"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(400):
            with open(w.audit) as f:
                for line in f:
                    j = json.loads(line)
                    if j.get("sandbox") == name and j.get("event") == "frozen":
                        return j["latency_us"]
            time.sleep(0.025)
        raise SystemExit(f"{name}: no frozen event")
    finally:
        w.airlock("kill", name, check=False)
        p.wait(10)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--sandboxes", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--idle", type=float, default=10.0)
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench_scale: run as root")
    policy = os.path.join(a.work, "policy.json")
    rules = [{"action": "allow", "cidr": f"10.{i // 256}.{i % 256}.0/24", "ports": [443]} for i in range(200)]
    rules.append({"action": "allow", "cidr": "127.0.0.1/32"})
    with open(policy, "w") as f:
        json.dump({"version": 1, "name": "scale", "on_violation": "freeze", "rules": rules}, f)
    w = World(a)
    try:
        w.start_daemon()
        before = map_memlock()
        w.airlock("sandbox", "create", "s0", "--policy", policy)
        one = measure(w, "1 sandbox", "s0")
        lat1 = freeze_latency_us(w, "s0")
        w.airlock("thaw", "s0")
        create_ms = []
        for i in range(1, a.sandboxes):
            t0 = time.monotonic()
            w.airlock("sandbox", "create", f"s{i}", "--policy", policy)
            create_ms.append((time.monotonic() - t0) * 1000)
        many = measure(w, f"{a.sandboxes} sandboxes", "s0")
        last = f"s{a.sandboxes - 1}"
        latn = freeze_latency_us(w, last)
        per_sandbox = (many["map_memlock_bytes"] - one["map_memlock_bytes"]) / (a.sandboxes - 1)
        print(json.dumps({
            "sandboxes": a.sandboxes,
            "create_ms_median": round(statistics.median(create_ms), 1),
            "create_ms_max": round(max(create_ms), 1),
            "map_memlock_first_sandbox_bytes": one["map_memlock_bytes"] - before,
            "map_memlock_per_further_sandbox_bytes": round(per_sandbox),
            "daemon_rss_anon_kib": [one["daemon_rss_anon_kib"], many["daemon_rss_anon_kib"]],
            "daemon_vm_rss_kib": [one["daemon_vm_rss_kib"], many["daemon_vm_rss_kib"]],
            "daemon_idle_cpu_percent": [one["daemon_idle_cpu_percent"], many["daemon_idle_cpu_percent"]],
            "status_ms": [one["status_ms"], many["status_ms"]],
            "tcp_connect_ratio": round(many["tcp_connect_ns"] / one["tcp_connect_ns"], 3),
            "udp_sendto_ratio": round(many["udp_sendto_ns"] / one["udp_sendto_ns"], 3),
            "freeze_latency_us": [lat1, latn],
        }), flush=True)
    finally:
        w.cleanup()


if __name__ == "__main__":
    sys.exit(main())
