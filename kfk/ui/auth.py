"""The console's optional login: `kfk ui --auth basic --users-file FILE`, against a users file in the format Kafka
Connect's REST basic authentication reads (Jetty's realm properties, one ``name: password[,role ...]`` per line,
``#`` comments; roles are accepted and ignored here).

Two ways in, one check (PasswordLogins.check):

- a browser is sent to /login, a form whose answer (POSTed with the CSRF token like every other form, csrf.py, so a
  page of another site cannot log the operator in as someone else) sets a signed session cookie; /logout (a POST)
  ends it;
- a script or curl sends HTTP Basic's ``Authorization`` header with every request, as before the form existed.

Why a signed cookie and not a session table: the console has no database and restarts freely; the cookie carries the
user, a logout generation and the time it was issued under an HMAC whose key is made when the process starts, so it
cannot be forged, it expires (SESSION_MAX_AGE_S), a restart logs everyone out, and a logout ends every session of
that user (the user's generation moves on; the server keeps one number per user of the file, nothing per session).

Failed logins (form and Basic alike) are counted per user of the file, and in one shared count for every name not in
it, so what is kept is bounded by the file and not by what attackers type: after MAX_FAILURES in a row a user's
logins (the right password too) are refused for LOCKOUT_S, with a line in the action log for each failure. The
passwords are compared in constant time, unknown names included; the file is read once at start. Basic and the form
both send the password in clear unless the console runs with TLS (--certfile/--keyfile), which `kfk ui` says when
started without it off loopback.

The authenticated name is put in the request's state (``request.state.user``): the action log (csrf.py) writes it
beside the client's address.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import secrets
import threading
import time
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import quote

from starlette.datastructures import Headers
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["BasicAuth", "PasswordLogins", "LockedOut", "read_users_file", "login_cookie_header", "client_address",
           "REALM", "LOGIN_COOKIE", "MAX_FAILURES", "LOCKOUT_S", "SESSION_MAX_AGE_S"]

REALM = "kfk console"
LOGIN_COOKIE = "kfk_console_login"
#: Failed logins in a row that lock a user out, and for how long.
MAX_FAILURES = 5
LOCKOUT_S = 60.0
#: How long a login from the form lasts (a working day).
SESSION_MAX_AGE_S = 12 * 3600

actions_log = logging.getLogger("kfk.ui.actions")


def read_users_file(path: Path) -> dict[str, str]:
    """name -> password from a realm properties file; ValueError naming the line for a malformed one."""
    users: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        name, separator, rest = line.partition(":")
        if not separator:
            name, separator, rest = line.partition("=")
        name, password = name.strip(), rest.split(",")[0].strip()
        if not separator or not name or not password:
            raise ValueError(f"{path}:{number}: a user is 'name: password[,role ...]'")
        users[name] = password
    if not users:
        raise ValueError(f"{path} names no user")
    return users


class LockedOut(Exception):
    """Too many failed logins in a row: the message says for how much longer logins are refused."""


@dataclass
class _Failures:
    in_a_row: int = 0
    locked_until: float = 0.0


class PasswordLogins:
    """The users of the file, the failed-login counts and the signed session cookies (see the module docstring)."""

    def __init__(self, users: dict[str, str], *, max_failures: int = MAX_FAILURES, lockout_s: float = LOCKOUT_S,
                 session_max_age_s: int = SESSION_MAX_AGE_S) -> None:
        self._passwords = {name: password.encode() for name, password in users.items()}
        self._key = secrets.token_bytes(32)
        self._lock = threading.Lock()
        self.max_failures = max_failures
        self.lockout_s = lockout_s
        self.session_max_age_s = session_max_age_s
        # Keyed by the file's names, and None for any other name: bounded by the file, whatever is typed.
        self._failures: dict[str | None, _Failures] = {}
        self._generations = dict.fromkeys(users, 0)

    def check(self, name: str, password: str, client: str) -> bool:
        """Whether ``password`` is ``name``'s; a failure is counted and logged. Raises LockedOut while ``name`` is
        locked out (the right password is refused then too)."""
        key = name if name in self._passwords else None
        now = time.monotonic()
        with self._lock:
            failures = self._failures.get(key)
            if failures is not None and failures.locked_until > now:
                raise LockedOut(f"too many failed logins as {name}: try again in {failures.locked_until - now:.0f} s")
        expected = self._passwords.get(name)
        # Compared even for an unknown name (against itself), so the answer's time does not tell names apart.
        matches = hmac.compare_digest(password.encode(), expected if expected is not None else password.encode())
        if expected is not None and matches:
            with self._lock:
                self._failures.pop(key, None)
            return True
        with self._lock:
            failures = self._failures.setdefault(key, _Failures())
            failures.in_a_row += 1
            count = failures.in_a_row
            if count >= self.max_failures:
                failures.in_a_row, failures.locked_until = 0, now + self.lockout_s
        actions_log.warning("failed login as %r from %s (%d in a row%s)", name, client, count,
                            f"; locked out for {self.lockout_s:g} s" if count >= self.max_failures else "")
        return False

    def session_cookie(self, name: str) -> str:
        """The value of the login cookie for ``name`` (just checked)."""
        with self._lock:
            generation = self._generations[name]
        payload = f"{base64.urlsafe_b64encode(name.encode()).decode()}.{generation}.{int(time.time())}"
        return f"{payload}.{self._signature(payload)}"

    def user_of(self, cookie: str) -> str | None:
        """The user a login cookie was issued to, or None when it is forged, expired or logged out."""
        payload, _, signature = cookie.rpartition(".")
        if not hmac.compare_digest(signature.encode(), self._signature(payload).encode()):
            return None
        encoded, generation, issued = payload.split(".")
        name = base64.urlsafe_b64decode(encoded).decode()
        with self._lock:
            current = self._generations.get(name)
        if current != int(generation) or time.time() - int(issued) > self.session_max_age_s:
            return None
        return name

    def log_out(self, name: str) -> None:
        """Ends every form login of ``name`` (their cookies stop being accepted)."""
        with self._lock:
            if name in self._generations:
                self._generations[name] += 1

    def _signature(self, payload: str) -> str:
        return hmac.new(self._key, payload.encode(), hashlib.sha256).hexdigest()


def login_cookie_header(value: str, *, secure: bool, max_age_s: int) -> str:
    """The Set-Cookie value of the login cookie (max_age_s 0: delete it). SameSite=Lax as the CSRF cookie, for the
    same reason (csrf.py); HttpOnly, so no script reads it."""
    return (f"{LOGIN_COOKIE}={value}; Path=/; Max-Age={max_age_s}; HttpOnly; SameSite=Lax"
            f"{'; Secure' if secure else ''}")


def _cookie_of(headers: Headers) -> str | None:
    cookie = SimpleCookie()
    try:
        cookie.load(headers.get("cookie", ""))
    except Exception:  # noqa: BLE001 - a malformed Cookie header is no login, not an error
        return None
    morsel = cookie.get(LOGIN_COOKIE)
    return morsel.value if morsel is not None else None


def _basic_credentials(authorization: str) -> tuple[str, str] | None:
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        name, separator, password = base64.b64decode(credentials.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (name, password) if separator else None


def client_address(scope: Scope) -> str:
    """The request's client as ``host:port``, for the action log."""
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "unknown client"


class BasicAuth:
    """ASGI middleware: a request needs a valid login cookie or ``Authorization: Basic`` header. Without either, a
    browser's page request goes to the login form (``/login?next=...``), anything else gets 401 (with Basic's
    challenge, except the pages' own /api/ calls, where a browser prompt would only confuse). /login and /static/
    are open to all."""

    def __init__(self, app: ASGIApp, logins: PasswordLogins) -> None:
        self.app = app
        self.logins = logins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        path: str = scope["path"]
        user: str | None = None
        authorization = headers.get("authorization")
        if authorization is not None:
            credentials = _basic_credentials(authorization)
            try:
                if credentials is not None and self.logins.check(*credentials, client_address(scope)):
                    user = credentials[0]
            except LockedOut as locked:
                await PlainTextResponse(f"429 Too Many Requests: {locked}\n", status_code=429)(scope, receive, send)
                return
            if user is None:
                await _unauthorized(path, "the user name or password is wrong")(scope, receive, send)
                return
        else:
            cookie = _cookie_of(headers)
            user = self.logins.user_of(cookie) if cookie else None
        if user is None and path != "/login" and not path.startswith("/static/"):
            if scope["method"] in ("GET", "HEAD") and "text/html" in headers.get("accept", ""):
                query = scope.get("query_string", b"").decode("latin-1")
                target = path + (f"?{query}" if query else "")
                await RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)(
                    scope, receive, send)
            else:
                await _unauthorized(path, "log in with a user of the console's users file")(scope, receive, send)
            return
        if user is not None:
            scope.setdefault("state", {})["user"] = user
        await self.app(scope, receive, send)


def _unauthorized(path: str, reason: str) -> Response:
    if path.startswith("/api/"):
        return JSONResponse({"error": f"401 Unauthorized: {reason}"}, status_code=401)
    return PlainTextResponse(f"401 Unauthorized: {reason}\n", status_code=401,
                             headers={"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'})
