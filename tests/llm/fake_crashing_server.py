"""A stand-in for a native llama.cpp build on an AMX CPU: it lists its model, then dies at the
first completion (SIGSEGV), as the real server does. Usage: python fake_crashing_server.py PORT"""

from __future__ import annotations

import json
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = json.dumps({"object": "list", "data": [{"id": "fake", "object": "model"}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        sys.stderr.write("traps: simulated general protection fault in libggml-cpu.so\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGSEGV)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - base signature
        sys.stderr.write("request: " + format % args + "\n")


if __name__ == "__main__":
    HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
