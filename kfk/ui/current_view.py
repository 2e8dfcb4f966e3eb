"""The ClusterView a request is served with, when the console has more than one: each operator's own client
(--auth sasl, operator_sessions) or the cluster the URL names (--cluster, clusters). A middleware sets it for the
request; ``CurrentView`` stands in for the single ClusterView the app's handlers otherwise close over, so every page
and action reads the request's own view without passing it through each handler.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from kfk.ui.cluster_view import ClusterView

__all__ = ["CURRENT_VIEW", "CurrentView"]

CURRENT_VIEW: ContextVar[ClusterView] = ContextVar("kfk_ui_current_view")


class CurrentView:
    """Attribute access goes to the request's ClusterView (CURRENT_VIEW)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(CURRENT_VIEW.get(), name)
