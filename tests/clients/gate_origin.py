#!/usr/bin/env python3
"""An HTTPS origin that says what it received: the HTTP gate's far side.

  gate_origin.py PORT CERT KEY GIT_ROOT

Listens on [::]:PORT with CERT/KEY (HTTP/1.1, kept-alive connections) and
prints one JSON line per request it reads, before answering it:
{"method", "target", "headers": [[name, value], ...], "body": text}. Paths
under /git/ are served by `git http-backend` (CGI) from GIT_ROOT, pushes
included; a WebSocket upgrade is accepted (101) and every byte after it
echoed back as it is, until the client ends; every other request is
answered 200 with the body "origin:" and its target. Prints "serving" once
it listens.
"""
import base64
import functools
import hashlib
import http.server
import json
import os
import socket
import ssl
import subprocess
import sys


WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _answer(self, status, headers, body):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _git(self, body):
        path, _, query = self.path.partition("?")
        env = {
            "GIT_PROJECT_ROOT": self.server.git_root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path[len("/git"):],
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": "agent",
            "REMOTE_ADDR": self.client_address[0],
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        }
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True, check=False).stdout
        head, _, rest = out.partition(b"\r\n\r\n")
        if not _:
            head, _, rest = out.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            k, _, v = line.partition(":")
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k:
                headers.append((k, v.strip()))
        self._answer(status, headers, rest)

    def _websocket(self):
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        while True:
            b = self.connection.recv(65536)
            if not b:
                break
            self.connection.sendall(b)
        self.close_connection = True

    def _any(self):
        body = self._read_body()
        print(json.dumps({"method": self.command, "target": self.path,
                          "headers": [[k, v] for k, v in self.headers.items()],
                          "body": body.decode("utf-8", "replace")}), flush=True)
        if self.headers.get("Upgrade", "").lower() == "websocket":
            self._websocket()
        elif self.path.startswith("/git/"):
            self._git(body)
        else:
            self._answer(200, [("Content-Type", "text/plain")], b"origin:" + self.path.encode())

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _any


class Server(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6
    daemon_threads = True


def main():
    port, cert, key, git_root = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    s = Server(("::", port), functools.partial(Handler))
    s.git_root = git_root
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    c.load_cert_chain(cert, key)
    s.socket = c.wrap_socket(s.socket, server_side=True)
    print("serving", flush=True)
    s.serve_forever()


if __name__ == "__main__":
    main()
