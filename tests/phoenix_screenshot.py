"""Screenshot of a Phoenix page with one tab of the selected span open, through headless
Chromium's DevTools protocol. Run by the Phoenix environment's Python (it has ``websockets``):
``python phoenix_screenshot.py CHROMIUM URL OUT TAB``. Every wait is bounded."""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

from websockets.sync.client import connect

WIDTH, HEIGHT = 1400, 1000
FIND_TAB = (
    "Array.from(document.querySelectorAll('[role=tab]'))"
    ".find(t => t.textContent.trim().startsWith({tab}))"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main(chromium: str, url: str, out: str, tab: str) -> None:
    port, profile = free_port(), tempfile.mkdtemp(prefix="advrag-chromium-")
    browser = subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--remote-debugging-port={port}", "--remote-allow-origins=*",
         f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}", url],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        page = None
        for _ in range(150):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json", timeout=2) as r:
                    page = next(t for t in json.load(r) if t["type"] == "page")
                break
            except (OSError, StopIteration):
                time.sleep(0.2)
        if page is None:
            raise RuntimeError("chromium's DevTools endpoint did not answer")
        ids = itertools.count(1)
        with connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=20) as ws:

            def call(method: str, **params: object) -> dict:
                number = next(ids)
                ws.send(json.dumps({"id": number, "method": method, "params": params}))
                while True:
                    message = json.loads(ws.recv(timeout=30))
                    if message.get("id") == number:
                        return message.get("result", {})

            def evaluate(expression: str) -> object:
                result = call("Runtime.evaluate", expression=expression, returnByValue=True)
                return result.get("result", {}).get("value")

            find = FIND_TAB.format(tab=json.dumps(tab))
            deadline = time.monotonic() + 40
            while not evaluate(f"!!{find}"):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no {tab!r} tab on {url}")
                time.sleep(0.5)
            evaluate(f"{find}.click()")
            time.sleep(2)
            shot = call("Page.captureScreenshot", format="png")
        with open(out, "wb") as handle:
            handle.write(base64.b64decode(shot["data"]))
    finally:
        browser.terminate()
        try:
            browser.wait(timeout=10)
        except subprocess.TimeoutExpired:
            browser.kill()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main(*sys.argv[1:5])
