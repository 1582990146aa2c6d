#!/usr/bin/env python3
"""The attacker's sink for airlock's kernel integration tests.

Runs inside a network namespace the test created (``ip netns exec als<id>``).
It listens on TCP and UDP on every given address and port, and captures every
frame on the given interface with an AF_PACKET socket, so that traffic the
sink's kernel drops (a source-routed packet, an IPv6 routing header, a
datagram to a port nobody listens on, an ICMP echo) is still seen.
Everything received is appended to a JSON-lines log:

  {"kind":"tcp-open","conn":N,"src":..,"dst":..,"port":..}
  {"kind":"tcp","conn":N,"src":..,"dst":..,"port":..,"data":<latin-1>}
  {"kind":"tcp-close","conn":N}
  {"kind":"udp","src":..,"dst":..,"port":..,"data":<latin-1>}
  {"kind":"frame","dir":"in"|"out","hex":..}
  {"kind":"stats","frames":N,"drops":N}        (at exit, best effort)

The ready file is written once every socket is bound. A TCP connection is
closed by the sink when the peer has shut down its side, so a client that
waits for the close knows its data has arrived. Python 3 stdlib only.
"""
import argparse
import errno
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET = 263
PACKET_STATISTICS = 6
SO_RCVBUFFORCE = 33
TCP_FASTOPEN = 23
IP_FREEBIND = 15
IPV6_FREEBIND = 78


def parse_ports(spec):
    out = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1))
        else:
            out.append(int(part))
    return out


def ename(e):
    return errno.errorcode.get(e.errno, str(e.errno))


class Sink:
    def __init__(self, args):
        self.args = args
        self.sel = selectors.DefaultSelector()
        self.log_fd = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        self.pending = []
        self.next_conn = 1
        self.conns = {}
        self.frames = 0
        self.packet_sock = None
        self.stop = False

    def emit(self, rec):
        self.pending.append(json.dumps(rec, separators=(",", ":")) + "\n")

    def flush(self):
        if not self.pending:
            return
        data = "".join(self.pending).encode()
        self.pending = []
        while data:
            n = os.write(self.log_fd, data)
            data = data[n:]

    @staticmethod
    def _freebind(s, fam):
        try:
            if fam == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, IPV6_FREEBIND, 1)
            else:
                s.setsockopt(socket.IPPROTO_IP, IP_FREEBIND, 1)
        except OSError:
            pass

    def bind_all(self):
        for addr in self.args.addr:
            fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
            for port in parse_ports(self.args.tcp):
                s = socket.socket(fam, socket.SOCK_STREAM)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                self._freebind(s, fam)
                if fam == socket.AF_INET6:
                    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                try:
                    s.setsockopt(socket.IPPROTO_TCP, TCP_FASTOPEN, 64)
                except OSError:
                    pass
                s.bind((addr, port))
                s.listen(1024)
                s.setblocking(False)
                self.sel.register(s, selectors.EVENT_READ, ("listen", addr, port))
            for port in parse_ports(self.args.udp):
                s = socket.socket(fam, socket.SOCK_DGRAM)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 4 << 20)
                except OSError:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
                self._freebind(s, fam)
                if fam == socket.AF_INET6:
                    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                s.bind((addr, port))
                s.setblocking(False)
                self.sel.register(s, selectors.EVENT_READ, ("udp", addr, port))
        if self.args.iface:
            p = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            try:
                p.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 32 << 20)
            except OSError:
                p.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 20)
            p.bind((self.args.iface, ETH_P_ALL))
            p.setblocking(False)
            self.packet_sock = p
            self.sel.register(p, selectors.EVENT_READ, ("packet",))

    def on_listen(self, s, addr, port):
        for _ in range(64):
            try:
                c, peer = s.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self.emit({"kind": "error", "where": "accept", "errno": ename(e)})
                return
            cid = self.next_conn
            self.next_conn += 1
            c.setblocking(False)
            self.conns[cid] = c
            self.sel.register(c, selectors.EVENT_READ, ("conn", cid, addr, port, peer[0]))
            self.emit({"kind": "tcp-open", "conn": cid, "src": peer[0], "dst": addr, "port": port})

    def close_conn(self, c, cid, why=None):
        self.sel.unregister(c)
        c.close()
        del self.conns[cid]
        rec = {"kind": "tcp-close", "conn": cid}
        if why:
            rec["errno"] = why
        self.emit(rec)

    def on_conn(self, c, cid, addr, port, src):
        for _ in range(64):
            try:
                data = c.recv(65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self.close_conn(c, cid, ename(e))
                return
            if not data:
                self.close_conn(c, cid)
                return
            self.emit({"kind": "tcp", "conn": cid, "src": src, "dst": addr, "port": port,
                       "data": data.decode("latin-1")})

    def on_udp(self, s, addr, port):
        for _ in range(256):
            try:
                data, peer = s.recvfrom(65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return  # a queued ICMP error: nothing received
            self.emit({"kind": "udp", "src": peer[0], "dst": addr, "port": port, "data": data.decode("latin-1")})

    def on_packet(self, p):
        for _ in range(1024):
            try:
                data, info = p.recvfrom(65536)
            except (BlockingIOError, InterruptedError):
                return
            self.frames += 1
            direction = "out" if info[2] == PACKET_OUTGOING else "in"
            self.emit({"kind": "frame", "dir": direction, "hex": data.hex()})

    def stats(self):
        rec = {"kind": "stats", "frames": self.frames}
        if self.packet_sock is not None:
            try:
                raw = self.packet_sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
                rec["packets"], rec["drops"] = struct.unpack("II", raw)
            except OSError:
                pass
        return rec

    def run(self):
        self.bind_all()
        tmp = self.args.ready + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % os.getpid())
        os.replace(tmp, self.args.ready)
        deadline = time.monotonic() + self.args.max_seconds
        while not self.stop and time.monotonic() < deadline:
            events = self.sel.select(timeout=0.2)
            # Frames first: a frame is always logged no later than the data
            # a socket received from it.
            events.sort(key=lambda kv: 0 if kv[0].data[0] == "packet" else 1)
            for key, _ in events:
                tag = key.data
                if tag[0] == "packet":
                    self.on_packet(key.fileobj)
                elif tag[0] == "listen":
                    self.on_listen(key.fileobj, tag[1], tag[2])
                elif tag[0] == "udp":
                    self.on_udp(key.fileobj, tag[1], tag[2])
                elif tag[0] == "conn" and tag[1] in self.conns:
                    self.on_conn(key.fileobj, *tag[1:])
            self.flush()
        self.emit(self.stats())
        self.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--addr", action="append", required=True, help="address to listen on (repeat)")
    ap.add_argument("--tcp", default="", help="TCP ports, e.g. 9000-9039,9099")
    ap.add_argument("--udp", default="", help="UDP ports")
    ap.add_argument("--iface", default="", help="capture every frame on this interface")
    ap.add_argument("--max-seconds", type=float, default=120.0, help="exit after this long")
    args = ap.parse_args()
    sink = Sink(args)

    def on_term(signum, frame):
        sink.stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    sink.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
