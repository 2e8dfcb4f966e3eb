"""`kfk ui --auth sasl`: each operator logs in with their own Kafka (SASL PLAIN or SCRAM) user and password, and the
console talks to the cluster as that user, through an Admin client of their own: Kafka's ACLs, not the console,
decide what each operator may see and do, and the broker's audit names the operator, not a shared console user.

The credentials come in with HTTP Basic (the browser's login prompt; send them only over HTTPS or loopback) and are
tried once against the cluster: a SASL authentication failure is a 401, so a wrong password never gets a client. The
clients are bounded: at most ``max_sessions`` at once (more logins are refused with 503, never evicting an operator
in the middle of an incident), each closed after ``idle_timeout_s`` without a request, or at once at /logout.

The request's client is handed to the app as its current view (current_view).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from kfk.errors import KafkaError, SaslAuthenticationError
from kfk.ui.cluster_view import ClusterView
from kfk.ui.current_view import CURRENT_VIEW

__all__ = ["OperatorClients", "SaslLogin", "REALM"]

REALM = "kfk console (Kafka credentials)"


class OperatorClients:
    """One ClusterView per logged-in operator (keyed by user and a hash of the password, so a changed password is a
    new login), bounded in number and idle time."""

    def __init__(self, client_config: Mapping[str, Any], *, max_sessions: int = 16, idle_timeout_s: float = 900,
                 new_view: Callable[[Mapping[str, Any]], ClusterView] = ClusterView) -> None:
        self._config = dict(client_config)
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self._new_view = new_view
        self._views: dict[tuple[str, bytes], tuple[ClusterView, float]] = {}
        self._lock = threading.Lock()

    @property
    def bootstrap_servers(self) -> str:
        return str(self._config.get("bootstrap.servers", ""))

    def open_count(self) -> int:
        return len(self._views)

    def view_for(self, user: str, password: str) -> ClusterView:
        """The operator's client, made (and their credentials tried on the cluster) at the first request. Raises
        SaslAuthenticationError for credentials the cluster refuses, OverflowError when too many are logged in."""
        key = (user, hashlib.sha256(password.encode()).digest())
        self._expire()
        with self._lock:
            if key in self._views:
                view = self._views[key][0]
                self._views[key] = (view, time.monotonic())
                return view
            if len(self._views) >= self.max_sessions:
                raise OverflowError(f"{self.max_sessions} operators are logged in already: try again when one logs "
                                    "out or has been idle for "
                                    f"{self.idle_timeout_s / 60:g} minutes")
        view = self._new_view(dict(self._config, **{"sasl.username": user, "sasl.password": password}))
        try:
            view.admin.describe_cluster(timeout_ms=10000)
        except SaslAuthenticationError:
            view.close()
            raise
        except KafkaError:
            pass  # the cluster is down or slow: the pages say so, and the client retries
        with self._lock:
            existing = self._views.get(key)
            if existing is not None:  # the same operator's parallel first requests: keep one client
                view.close()
                view = existing[0]
            self._views[key] = (view, time.monotonic())
        return view

    def log_out(self, user: str, password: str) -> bool:
        key = (user, hashlib.sha256(password.encode()).digest())
        with self._lock:
            found = self._views.pop(key, None)
        if found is not None:
            found[0].close()
        return found is not None

    def _expire(self) -> None:
        now = time.monotonic()
        with self._lock:
            idle = [key for key, (_, used) in self._views.items() if now - used > self.idle_timeout_s]
            expired = [self._views.pop(key)[0] for key in idle]
        for view in expired:
            view.close()

    def close(self) -> None:
        with self._lock:
            views = [view for view, _ in self._views.values()]
            self._views.clear()
        for view in views:
            view.close()


def _credentials(authorization: str) -> tuple[str, str] | None:
    scheme, _, encoded = authorization.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, separator, password = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return (user, password) if separator and user else None


def _challenge(message: str, status_code: int = 401) -> PlainTextResponse:
    return PlainTextResponse(message + "\n", status_code=status_code,
                             headers={"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'}
                             if status_code == 401 else None)


class SaslLogin:
    """ASGI middleware: every HTTP request carries the operator's Kafka credentials (HTTP Basic); the request runs
    with that operator's ClusterView as the current one. GET /logout closes the operator's client."""

    def __init__(self, app: ASGIApp, operators: OperatorClients) -> None:
        self.app = app
        self.operators = operators

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        credentials = _credentials(Headers(scope=scope).get("authorization", ""))
        if credentials is None:
            await _challenge("401 Unauthorized: log in with your Kafka user and password")(scope, receive, send)
            return
        if scope["path"] == "/logout":
            await run_in_threadpool(self.operators.log_out, *credentials)
            # A 401 makes the browser forget the credentials it was sending.
            await _challenge(f"Logged out {credentials[0]}: the console's client for you is closed")(
                scope, receive, send)
            return
        try:
            view = await run_in_threadpool(self.operators.view_for, *credentials)
        except SaslAuthenticationError as error:
            await _challenge(f"401 Unauthorized: the cluster refused {credentials[0]}'s credentials: {error}")(
                scope, receive, send)
            return
        except OverflowError as error:
            await _challenge(f"503 Service Unavailable: {error}", 503)(scope, receive, send)
            return
        scope.setdefault("state", {})["user"] = credentials[0]
        token = CURRENT_VIEW.set(view)
        try:
            await self.app(scope, receive, send)
        finally:
            CURRENT_VIEW.reset(token)
