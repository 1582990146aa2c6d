#!/usr/bin/env python3
"""The HTTP gate benchmark's origin: HTTPS on 127.0.0.1 at each PORT given,
HTTP/1.1 kept alive. GET /small answers 2 bytes; GET /big?n=BYTES answers
BYTES bytes, written from one buffer in 1 MiB pieces.

  gate_origin.py CERT KEY PORT...
"""
import http.server
import socket
import ssl
import sys
import threading

PIECE = b"x" * (1 << 20)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        # Head and body are two writes: not held back for an ACK.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self):
        path, _, query = self.path.partition("?")
        n = 2
        if path == "/big":
            n = int(query.partition("=")[2] or 0)
        self.send_response(200)
        self.send_header("Content-Length", str(n))
        self.end_headers()
        left = n
        while left > 0:
            k = min(left, len(PIECE))
            self.wfile.write(PIECE[:k])
            left -= k


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(port, ctx):
    s = Server(("127.0.0.1", port), Handler)
    s.socket = ctx.wrap_socket(s.socket, server_side=True)
    s.serve_forever()


def main():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[1], sys.argv[2])
    for port in sys.argv[3:]:
        threading.Thread(target=serve, args=(int(port), ctx), daemon=True).start()
    print("serving", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
