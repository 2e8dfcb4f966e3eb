"""The console's defence against cross-site request forgery: any web page the operator has open can make the browser
send a form or a fetch() to http://127.0.0.1:9021, so a console that obeys every POST deletes topics for whoever
wrote that page. Every request that is not GET or HEAD must therefore

1. come from the console's own origin: the browser's Origin header (or, when a browser sends none, its Referer) must
   name the scheme, host and port the request was sent to; and
2. carry the session's CSRF token, in the form's ``csrf_token`` field or an ``X-CSRF-Token`` header (fetch()).

Either alone is refused with 403. Why both: the Origin check alone trusts every client that sends no Origin, and the
token alone trusts the cookie jar, which browsers share across ports of one host (a page on 127.0.0.1:8000 may set
cookies 127.0.0.1:9021 receives). Clients that are not browsers (curl, scripts) send no Origin and pass check 1, but
still need a token, so they must GET a page first, as a browser does.

The session is a random id in an HttpOnly cookie; its token is an HMAC of that id under a key made when the process
starts, so no server-side store is needed, a token cannot be computed without the key, and a restart invalidates
every token (the refusal says to reload the page). The cookie is SameSite=Lax rather than Strict: a cross-site POST
carries no cookie either way, and Strict would also drop it on a link followed from another site (a runbook, a chat),
making the console issue a new session that breaks the forms of the operator's other open tabs.

Every state-changing request is logged on ``kfk.ui.actions`` with the cluster it acted on (its name when the console
serves several, clusters.py, and its bootstrap servers), the client's address, the user who logged in (auth.py; when
the console has a users file) and the outcome.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
from collections.abc import Callable
from http.cookies import SimpleCookie
from urllib.parse import unquote_plus, urlsplit

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kfk.ui.auth import client_address

__all__ = ["CsrfGuard", "SESSION_COOKIE", "TOKEN_FIELD", "TOKEN_HEADER"]

SESSION_COOKIE = "kfk_console_session"
TOKEN_FIELD = "csrf_token"
TOKEN_HEADER = "x-csrf-token"
_SAFE_METHODS = frozenset({"GET", "HEAD"})
_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{43}$")
# A page of another site must not frame the console either: it could lay its own buttons over the console's
# (clickjacking), and the framed page would carry a valid token.
_FRAMING_REFUSED = ((b"x-frame-options", b"DENY"), (b"content-security-policy", b"frame-ancestors 'none'"))

actions_log = logging.getLogger("kfk.ui.actions")


class CsrfGuard:
    """ASGI middleware: gives every browser a session cookie, puts its token in ``request.state.csrf_token`` for the
    templates, and refuses state-changing requests that fail the checks of the module docstring."""

    def __init__(self, app: ASGIApp, cluster_of: Callable[[Scope], str]) -> None:
        """``cluster_of``: the cluster a request acts on, in words, for the action log."""
        self.app = app
        self._cluster_of = cluster_of
        self._key = secrets.token_bytes(32)

    def _token_for(self, session_id: str) -> str:
        return hmac.new(self._key, session_id.encode(), hashlib.sha256).hexdigest()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        session_id = _session_of(headers)
        extra_headers = list(_FRAMING_REFUSED)
        if session_id is None:
            session_id = secrets.token_urlsafe(32)
            extra_headers.append(_session_cookie(session_id, scope.get("scheme") == "https"))
        token = self._token_for(session_id)
        scope.setdefault("state", {})["csrf_token"] = token
        send = _with_headers(send, extra_headers)
        method = scope["method"]
        if method in _SAFE_METHODS:
            await self.app(scope, receive, send)
            return

        client = _client_of(scope)
        cluster = self._cluster_of(scope)
        refusal = _cross_origin(scope, headers)
        if refusal is None:
            body = await _read_body(receive)
            receive = _replay(body, receive)
            sent = headers.get(TOKEN_HEADER) or await _form_token(scope, body)
            if not sent or not hmac.compare_digest(sent.encode(), token.encode()):
                refusal = ("no valid CSRF token (the page may be from before the console restarted, or from another "
                           "site): reload the page and try again")
        if refusal is not None:
            actions_log.warning("refused %s %s on %s from %s: %s", method, scope["path"], cluster, client, refusal)
            response = _refusal(scope, refusal)
            await response(scope, receive, send)
            return

        status: list[int] = []
        location: list[str] = []

        async def recording_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
                location.append(Headers(raw=message["headers"]).get("location", ""))
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            # Who it was, asked again: a login names its user only once it has been answered.
            actions_log.info("%s %s on %s by %s: %s%s", method, scope["path"], cluster, _client_of(scope),
                             status[0] if status else "no response", _outcome(location[0] if location else ""))


def _session_of(headers: Headers) -> str | None:
    cookie = SimpleCookie()
    try:
        cookie.load(headers.get("cookie", ""))
    except Exception:  # noqa: BLE001 - a malformed Cookie header is a missing session, not an error
        return None
    morsel = cookie.get(SESSION_COOKIE)
    if morsel is None or not _SESSION_ID.match(morsel.value):
        return None
    return morsel.value


def _session_cookie(session_id: str, secure: bool) -> tuple[bytes, bytes]:
    cookie = f"{SESSION_COOKIE}={session_id}; Path=/; HttpOnly; SameSite=Lax{'; Secure' if secure else ''}"
    return b"set-cookie", cookie.encode()


def _with_headers(send: Send, extra_headers: list[tuple[bytes, bytes]]) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *extra_headers]}
        await send(message)

    return sending


def _client_of(scope: Scope) -> str:
    """Who sent the request: the logged-in user and the address (``alice at 127.0.0.1:53012``), or the address."""
    address = client_address(scope)
    user = scope.get("state", {}).get("user")
    return f"{user} at {address}" if user else address


def _cross_origin(scope: Scope, headers: Headers) -> str | None:
    """Why the request is cross-origin, or None when its Origin (else Referer) is the console's own, or absent."""
    own = f"{scope.get('scheme', 'http')}://{headers.get('host', '')}".lower()
    origin = headers.get("origin")
    if origin is not None:
        return None if origin.lower() == own else f"cross-origin request (Origin {origin}, expected {own})"
    referer = headers.get("referer")
    if referer is not None:
        parts = urlsplit(referer)
        referer_origin = f"{parts.scheme}://{parts.netloc}".lower()
        return None if referer_origin == own else f"cross-origin request (Referer {referer_origin}, expected {own})"
    return None


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive() that gives the already-read body once more, to the app."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replaying() -> Message:
        return pending.pop() if pending else await receive()

    return replaying


async def _form_token(scope: Scope, body: bytes) -> str | None:
    content_type = Headers(scope=scope).get("content-type", "")
    if not content_type.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
        return None
    try:
        form = await Request(scope, _replay(body, _no_more)).form()
    except Exception:  # noqa: BLE001 - a body that does not parse as its form type carries no token
        return None
    value = form.get(TOKEN_FIELD)
    return value if isinstance(value, str) else None


async def _no_more() -> Message:
    return {"type": "http.disconnect"}


def _refusal(scope: Scope, reason: str) -> Response:
    if scope["path"].startswith("/api/"):
        return JSONResponse({"error": reason}, status_code=403)
    return PlainTextResponse(f"403 Forbidden: {reason}\n", status_code=403)


def _outcome(location: str) -> str:
    """The notice or error a post/redirect/get answer carries in its query string, for the log line."""
    query = urlsplit(location).query
    for part in query.split("&"):
        name, _, value = part.partition("=")
        if name in ("notice", "error"):
            return f" ({name}: {unquote_plus(value)})"
    return ""
