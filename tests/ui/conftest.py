"""Fixtures of the web console's tests: `kfk ui` as a real subprocess on an ephemeral port, and a headless Debian
chromium driven by Playwright (the browser comes from apt; Playwright never downloads one)."""

from __future__ import annotations

import base64
import html
import http.cookiejar
import os
import re
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

_ADDRESS = re.compile(r"kfk console on (https?://\S+/)")
_TOKEN = re.compile(r'<meta name="csrf-token" content="([^"]*)">')
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("KFK_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts")) / "ui"


class ConsoleProcess:
    """A running `kfk ui`; ``url`` is its address (ending in /)."""

    def __init__(self, process: subprocess.Popen, url: str, stderr_path: Path) -> None:
        self.process = process
        self.url = url
        self.stderr_path = stderr_path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


class ConsoleSession:
    """An HTTP client of the console that behaves as a browser tab does: it keeps the session cookie, reads the CSRF
    token from the first page it gets, and puts it in every form it posts (unless told not to). Redirects are not
    followed, so a post's answer is the 303 and its Location."""

    def __init__(self, url: str, *, ssl_context: ssl.SSLContext | None = None,
                 login: tuple[str, str] | None = None) -> None:
        """`ssl_context`: to trust an HTTPS console's certificate; `login`: (user, password) sent with HTTP Basic."""
        self.url = url
        self.cookies = http.cookiejar.CookieJar()
        self.token: str | None = None
        self.ssl_context = ssl_context
        self.authorization = ("Basic " + base64.b64encode(":".join(login).encode()).decode()) if login else None

    def _open(self, request: urllib.request.Request) -> tuple[int, str, str]:
        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args, **kwargs):
                return None

        if self.authorization is not None:
            request.add_header("Authorization", self.authorization)
        opener = urllib.request.build_opener(NoRedirect, urllib.request.HTTPCookieProcessor(self.cookies),
                                             urllib.request.HTTPSHandler(context=self.ssl_context))
        try:
            with opener.open(request, timeout=30) as response:
                return response.status, response.headers.get("location", ""), response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.headers.get("location", ""), error.read().decode()

    def get(self, path: str) -> tuple[int, str]:
        status, _, body = self._open(urllib.request.Request(self.url + path))
        found = _TOKEN.search(body)
        if found:
            self.token = html.unescape(found.group(1))
        return status, body

    def post(self, path: str, fields: dict[str, str], *, with_token: bool = True,
             headers: dict[str, str] | None = None) -> tuple[int, str, str]:
        """POST a form; returns (status, Location, body)."""
        if with_token and self.token is None:
            self.get("")
        data = dict(fields, csrf_token=self.token) if with_token else dict(fields)
        request = urllib.request.Request(self.url + path, data=urllib.parse.urlencode(data).encode(),
                                         headers=headers or {})
        return self._open(request)


@pytest.fixture
def console_factory(tmp_path: Path) -> Iterator[Callable[..., ConsoleProcess]]:
    started: list[ConsoleProcess] = []

    def start(bootstrap_server: str, *extra: str) -> ConsoleProcess:
        stderr_path = tmp_path / f"ui-{len(started)}.stderr"
        stderr = stderr_path.open("w")
        process = subprocess.Popen(
            [sys.executable, "-m", "kfk", "ui", "--bootstrap-server", bootstrap_server, "--port", "0",
             "--refresh-ms", "500", *extra], stdout=subprocess.DEVNULL, stderr=stderr)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            match = _ADDRESS.search(stderr_path.read_text())
            if match:
                console = ConsoleProcess(process, match.group(1), stderr_path)
                started.append(console)
                return console
            if process.poll() is not None:
                break
            time.sleep(0.1)
        process.kill()
        raise AssertionError(f"kfk ui did not start: {stderr_path.read_text()}")

    yield start
    for console in started:
        console.stop()


@pytest.fixture
def browser_page(request: pytest.FixtureRequest) -> Iterator:
    """A Playwright page in headless chromium; JavaScript errors and failed requests are collected in
    ``page.kfk_errors`` for the test to assert on."""
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "Debian's chromium is missing: scripts/test.sh installs it"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.kfk_errors = errors
        try:
            yield page
        finally:
            browser.close()


def screenshot(page, name: str) -> Path:
    """Save a full-page screenshot as a test artifact (test-artifacts/ui/, or $KFK_TEST_ARTIFACTS/ui/)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
