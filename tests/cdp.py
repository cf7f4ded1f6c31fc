"""Drive Debian's headless Chromium over the DevTools protocol, through a pipe (no network).

``--remote-debugging-pipe`` makes Chromium read JSON commands on fd 3 and write replies and
events on fd 4, each message ending in a NUL byte: no port, no websocket library. Real input
events (``Input.dispatchKeyEvent`` / ``dispatchMouseEvent``) reach the page as trusted key
presses and clicks, and ``Browser.setDownloadBehavior`` saves what the page downloads into a
folder, so a test can click through a page and read the file a user would get.

The binary and the shared flags come from ``test_report_browser`` (which fails the test with
an install hint when Chromium is missing).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any

from test_report_browser import FLAGS, chromium

# keys the tests press: key -> (code, windowsVirtualKeyCode, text)
KEYS = {
    "ArrowLeft": ("ArrowLeft", 37, ""),
    "ArrowUp": ("ArrowUp", 38, ""),
    "ArrowRight": ("ArrowRight", 39, ""),
    "ArrowDown": ("ArrowDown", 40, ""),
    "Backspace": ("Backspace", 8, ""),
    "Enter": ("Enter", 13, "\r"),
}


class Browser:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, profile: Path, downloads: Path, timeout: float = 60.0):
        self.timeout = timeout
        self.events: list[dict] = []
        self._buf = b""
        self._next = 0
        cmd_r, self._cmd_w = os.pipe()  # we write commands, Chromium reads fd 3
        self._out_r, out_w = os.pipe()  # Chromium writes fd 4, we read
        child_in, child_out = os.dup(cmd_r), os.dup(out_w)  # inheritable copies

        def fds() -> None:
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        flags = [f for f in FLAGS if not f.startswith("--virtual-time-budget")]
        self.proc = subprocess.Popen(
            [
                chromium(),
                *flags,
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            preexec_fn=fds,
            close_fds=False,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        for fd in (cmd_r, out_w, child_in, child_out):
            os.close(fd)
        self.downloads = downloads
        self.send(
            "Browser.setDownloadBehavior",
            {"behavior": "allow", "downloadPath": str(downloads), "eventsEnabled": True},
        )
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        os.close(self._cmd_w)
        os.close(self._out_r)
        if self.proc.stderr is not None:
            self.proc.stderr.close()

    # -- protocol -------------------------------------------------------------------------
    def _messages(self, deadline: float):
        while True:
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                yield json.loads(raw)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("Chromium did not answer in time")
            ready, _, _ = select.select([self._out_r], [], [], left)
            if ready:
                chunk = os.read(self._out_r, 1 << 16)
                if not chunk:
                    raise RuntimeError("Chromium closed the DevTools pipe")
                self._buf += chunk

    def send(self, method: str, params: dict | None = None, session: bool = False) -> dict:
        """Send one command and return its result (raises on a protocol error)."""
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._cmd_w, json.dumps(msg).encode() + b"\0")
        for reply in self._messages(time.monotonic() + self.timeout):
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)
        raise AssertionError("unreachable")

    def wait_event(self, method: str, predicate=lambda params: True) -> dict:
        """The first (already received or coming) event ``method`` whose params pass."""
        for i, event in enumerate(self.events):
            if event.get("method") == method and predicate(event.get("params", {})):
                return self.events.pop(i)["params"]
        for event in self._messages(time.monotonic() + self.timeout):
            if event.get("method") == method and predicate(event.get("params", {})):
                return event["params"]
            self.events.append(event)
        raise AssertionError("unreachable")

    # -- page -----------------------------------------------------------------------------
    def open(self, url: str) -> None:
        self.send("Page.navigate", {"url": url}, session=True)
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        result = self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def press(self, key: str) -> None:
        """A trusted key press (keyDown with text, keyUp) of a letter, digit or named key."""
        if key in KEYS:
            code, vk, text = KEYS[key]
        else:
            code = f"Key{key.upper()}" if key.isalpha() else f"Digit{key}"
            vk, text = ord(key.upper()), key
        down = {"type": "keyDown", "key": key, "code": code, "windowsVirtualKeyCode": vk}
        if text:
            down["text"] = text
        self.send("Input.dispatchKeyEvent", down, session=True)
        self.send(
            "Input.dispatchKeyEvent",
            {"type": "keyUp", "key": key, "code": code, "windowsVirtualKeyCode": vk},
            session=True,
        )

    def click(self, selector: str) -> None:
        """A trusted mouse click in the middle of the first element matching ``selector``."""
        box = self.evaluate(
            "(function () { var e = document.querySelector(" + json.dumps(selector) + ");"
            " e.scrollIntoView({block: 'center'}); var r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1},
                session=True,
            )

    def type_text(self, text: str) -> None:
        self.send("Input.insertText", {"text": text}, session=True)

    def wait_download(self) -> Path:
        """The file of the next completed download (its suggested name in ``downloads``)."""
        begin = self.wait_event("Browser.downloadWillBegin")
        self.wait_event(
            "Browser.downloadProgress",
            lambda p: p.get("guid") == begin["guid"] and p.get("state") == "completed",
        )
        return self.downloads / begin["suggestedFilename"]

    def problems(self) -> list[str]:
        """Console errors/warnings, uncaught exceptions and log errors (CSP violations) seen."""
        out = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                out.append(str(params.get("exceptionDetails", {}).get("text")))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in (
                "error",
                "warning",
            ):
                out.append(str(params.get("args")))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                out.append(str(params["entry"].get("text")))
        return out
