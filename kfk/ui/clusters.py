"""Several clusters in one console (`kfk ui --cluster name=bootstrap ...`): every URL names its cluster
(``/clusters/<name>/topics/...``), so a link, a bookmark or a form always acts on the cluster it was made for, never
on whichever the console shows last; the pages switch clusters with a menu.

The app itself knows one cluster at a time: this middleware takes ``/clusters/<name>`` off the path, makes that
cluster's ClusterView the request's current view (current_view), tells the templates the prefix to put back on
their links, and puts it back on the redirects the app answers actions with.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote

from starlette.responses import PlainTextResponse, RedirectResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kfk.ui.cluster_view import ClusterView
from kfk.ui.current_view import CURRENT_VIEW

__all__ = ["ClusterSelect", "PREFIX"]

PREFIX = "/clusters/"


class ClusterSelect:
    """ASGI middleware: ``/clusters/<name>/rest`` is ``/rest`` of cluster ``name``; ``/`` goes to the first cluster;
    ``/static/`` is shared; anything else is 404."""

    def __init__(self, app: ASGIApp, views: Mapping[str, ClusterView]) -> None:
        self.app = app
        self.views = dict(views)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path.startswith("/static/"):
            await self.app(scope, receive, send)
            return
        if path == "/":
            first = next(iter(self.views))
            await RedirectResponse(f"{PREFIX}{quote(first, safe='')}/", status_code=307)(scope, receive, send)
            return
        name, _, rest = path[len(PREFIX):].partition("/") if path.startswith(PREFIX) else ("", "", "")
        view = self.views.get(name)
        if view is None:
            names = ", ".join(self.views)
            await PlainTextResponse(f"404 Not Found: no cluster named {name!r} in this console (clusters: {names})\n",
                                    status_code=404)(scope, receive, send)
            return
        prefix = PREFIX + quote(name, safe="")
        state = dict(scope.get("state", {}), cluster=name, cluster_prefix=prefix)
        inner = dict(scope, path="/" + rest, raw_path=("/" + rest).encode(), state=state)

        async def prefixed(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message, headers=[
                    (key, _prefixed(prefix, value) if key == b"location" else value)
                    for key, value in message.get("headers", [])])
            await send(message)

        token = CURRENT_VIEW.set(view)
        try:
            await self.app(inner, receive, prefixed)
        finally:
            CURRENT_VIEW.reset(token)


def _prefixed(prefix: str, location: bytes) -> bytes:
    """A redirect within the app, put back under its cluster (a "back" link from a page already is)."""
    mark = prefix.encode()
    if not location.startswith(b"/") or location == mark or location.startswith(mark + b"/") or \
            location.startswith(mark + b"?"):
        return location
    return mark + location
