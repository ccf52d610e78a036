"""A minimal W3C WebDriver client for tests: chromedriver over HTTP with urllib, stdlib only.

    with Chromium() as browser:
        browser.open(path)
        browser.click("#entries th:nth-child(5)")
        browser.run("return document.title")
        browser.console()           # the page's console entries (errors included)
        browser.screenshot(target)  # a PNG

Chromium and chromedriver come from Debian's packages (``chromium``, ``chromium-driver``);
:func:`ensure_chromium` installs them with apt-get when they are missing. Only 127.0.0.1 is
spoken to; the browser runs headless with no network use by the pages tested.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C web element identifier
PACKAGES = ("chromium", "chromium-driver")


def _binaries() -> tuple[str | None, str | None]:
    return shutil.which("chromium"), shutil.which("chromedriver")


def ensure_chromium() -> tuple[str, str]:
    """Paths of chromium and chromedriver, installing Debian's packages first if missing.

    Raises RuntimeError (with apt-get's last lines) when they cannot be installed."""
    browser, driver = _binaries()
    if browser and driver:
        return browser, driver
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    log = []
    for cmd in (
        ["apt-get", "install", "-y", *PACKAGES],
        ["apt-get", "update"],
        ["apt-get", "install", "-y", *PACKAGES],
    ):
        done = subprocess.run([*sudo, *cmd], capture_output=True, text=True, env=env, timeout=1200)
        log.append(f"$ {' '.join(cmd)} → {done.returncode}\n{done.stderr[-800:]}")
        browser, driver = _binaries()
        if browser and driver:
            return browser, driver
    raise RuntimeError(
        "chromium and chromedriver are missing and apt-get could not install them:\n" + "\n".join(log)
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class WebDriverError(RuntimeError):
    pass


class Chromium:
    """One headless Chromium session driven through chromedriver."""

    def __init__(self, browser: str, driver: str, width: int = 1400, height: int = 1000) -> None:
        self.browser, self.driver = browser, driver
        self.size = (width, height)
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.session: str | None = None

    def _call(self, method: str, path: str, body: Any = None, timeout: float = 60) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return json.loads(resp.read() or b"{}").get("value")
        except urllib.error.HTTPError as err:
            raise WebDriverError(f"{method} {path}: {err.code} {err.read()[:500]!r}") from err

    def __enter__(self) -> Chromium:
        self.proc = subprocess.Popen(
            [self.driver, f"--port={self.port}", "--allowed-ips=127.0.0.1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                if (self._call("GET", "/status", timeout=2) or {}).get("ready"):
                    break
            except (OSError, WebDriverError):
                pass
            if time.monotonic() > deadline:
                self.close()
                raise WebDriverError("chromedriver did not start within 30 s")
            time.sleep(0.1)
        w, h = self.size
        caps = {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": self.browser,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    f"--window-size={w},{h}",
                    "--no-first-run",
                    "--disable-extensions",
                ],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        }
        try:
            got = self._call("POST", "/session", {"capabilities": {"alwaysMatch": caps}}, timeout=120)
        except Exception:
            self.close()
            raise
        self.session = got["sessionId"]
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.session is not None:
            with contextlib.suppress(OSError, WebDriverError):
                self._call("DELETE", f"/session/{self.session}", timeout=20)
            self.session = None
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
            self.proc = None

    # -- commands -------------------------------------------------------------------
    def _s(self, path: str) -> str:
        return f"/session/{self.session}{path}"

    def open(self, target: Path) -> None:
        self._call("POST", self._s("/url"), {"url": target.resolve().as_uri()})

    def run(self, script: str, *args: Any) -> Any:
        return self._call("POST", self._s("/execute/sync"), {"script": script, "args": list(args)})

    def click(self, css: str) -> None:
        found = self._call("POST", self._s("/element"), {"using": "css selector", "value": css})
        self._call("POST", self._s(f"/element/{found[ELEMENT]}/click"), {})

    def console(self) -> list[dict[str, Any]]:
        """The browser's console entries since the last call (``level``: SEVERE for errors)."""
        return list(self._call("POST", self._s("/se/log"), {"type": "browser"}) or [])

    def screenshot(self, target: Path) -> Path:
        png = base64.b64decode(self._call("GET", self._s("/screenshot")))
        target.write_bytes(png)
        return target
