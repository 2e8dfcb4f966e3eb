"""The console's optional login: `kfk ui --auth basic --users-file FILE`, HTTP Basic authentication against a users
file in the format Kafka Connect's REST basic authentication reads (Jetty's realm properties, one
``name: password[,role ...]`` per line, ``#`` comments; roles are accepted and ignored here).

Why Basic and a file: the console has no database and a handful of operators; Basic needs no login page, works with
curl, and is what Kafka Connect offers for its REST API, so operators already keep such files. Basic sends the
password with every request, so outside loopback the console should run with TLS (--certfile/--keyfile), which `kfk
ui` says when started without it. The passwords are compared in constant time; the file is read once at start.

The authenticated name is put in the request's state (``request.state.user``): the action log (csrf.py) writes it
beside the client's address.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from pathlib import Path

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["BasicAuth", "read_users_file", "REALM"]

REALM = "kfk console"


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


class BasicAuth:
    """ASGI middleware: every HTTP request needs a valid ``Authorization: Basic`` header, else 401 with the
    challenge that makes a browser ask for a name and password."""

    def __init__(self, app: ASGIApp, users: dict[str, str]) -> None:
        self.app = app
        self._users = {name: password.encode() for name, password in users.items()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        user = self._authenticated(Headers(scope=scope).get("authorization", ""))
        if user is None:
            response = PlainTextResponse("401 Unauthorized: log in with a user of the console's users file\n",
                                         status_code=401,
                                         headers={"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'})
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})["user"] = user
        await self.app(scope, receive, send)

    def _authenticated(self, authorization: str) -> str | None:
        scheme, _, credentials = authorization.partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            name, separator, password = base64.b64decode(credentials.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        expected = self._users.get(name)
        # Compared even for an unknown name (against itself), so the answer's time does not tell names apart.
        matches = hmac.compare_digest(password.encode(), expected if expected is not None else password.encode())
        return name if separator and expected is not None and matches else None
