#!/usr/bin/env python3
"""UDP datagrams, one per DEST MARKER pair.

  udp_send.py [--mode sendto|connect|cmsg] DEST MARKER [DEST MARKER ...]

  sendto   unconnected socket, sendto(DEST)                  (sendmsg4/6)
  connect  connect(DEST) then send()                          (connect4/6)
  cmsg     connect(DEST) then sendmsg() with an IP_TOS (IPv4) or IPV6_TCLASS
           (IPv6) control message and no address: the kernel runs sendmsg4/6
           with 0.0.0.0:0 for this legitimate datagram
Prints {"client":"udp_send","mode":..,"results":[{dst,port,ok,errno,stage}]}.
"""
import argparse
import socket
import struct

import alclient

IPV6_TCLASS = getattr(socket, "IPV6_TCLASS", 67)


def one(mode, dest, payload):
    fam, host, port = alclient.parse_dest(dest)
    addr = alclient.sockaddr(fam, host, port)
    r = {"dst": host, "port": port, "proto": "udp", "mode": mode}
    try:
        s = socket.socket(fam, socket.SOCK_DGRAM)
    except OSError as e:
        r.update(ok=False, stage="socket", errno=alclient.errname(e))
        return r
    stage = "connect"
    try:
        if mode == "sendto":
            stage = "sendto"
            s.sendto(payload, addr)
        else:
            s.connect(addr)
            if mode == "connect":
                stage = "send"
                s.send(payload)
            else:
                stage = "sendmsg"
                if fam == socket.AF_INET6:
                    cmsg = [(socket.IPPROTO_IPV6, IPV6_TCLASS, struct.pack("i", 0x10))]
                else:
                    cmsg = [(socket.IPPROTO_IP, socket.IP_TOS, struct.pack("i", 0x10))]
                s.sendmsg([payload], cmsg)
        r.update(ok=True, errno=None, stage=stage)
    except OSError as e:
        r.update(ok=False, stage=stage, errno=alclient.errname(e))
    finally:
        s.close()
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["sendto", "connect", "cmsg"], default="sendto")
    ap.add_argument("items", nargs="+")
    a = ap.parse_args()
    results = []
    for dest, marker in alclient.pairs(a.items):
        r = one(a.mode, dest, marker.encode())
        r["marker"] = marker
        results.append(r)
    alclient.emit({"client": "udp_send", "mode": a.mode, "results": results})


if __name__ == "__main__":
    main()
