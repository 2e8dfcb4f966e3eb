"""Suite-wide settings.

Hypothesis explores new random examples on every developer run (that is how it finds bugs); under CI (CI=true) it
runs a fixed, derandomized set instead, so a landing is judged on the same examples every time and a red CI always
reproduces. A failure found locally is fixed, and its example pinned with @example when it is worth keeping. CI
has no per-example deadline: a timing limit on a shared, loaded machine fails for the machine, not the code (speed
is measured in bench/).
"""

from __future__ import annotations

import ast
import gc
import os
import sys
import threading

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    settings.load_profile("ci")


def _serialize_ast_parse() -> None:
    """CPython before 3.11.8 (and 3.12.2) keeps ast.parse's recursion depth per interpreter (python/cpython#106905):
    a parse that runs while another thread's is in progress fails with "SystemError: AST constructor recursion
    depth mismatch". pytest parses source to format every failure report, and the brokers' client threads format
    tracebacks too, so one failing test could end the whole xdist session with an INTERNALERROR (it did in CI, on
    3.11.7). One parse at a time avoids it; and no garbage collection during one: a finalizer it runs (asyncio's
    "Future exception was never retrieved" log) formats a traceback, whose caret anchors are parsed inside the
    parse under way, in the same thread (pytest's assertion rewriter importing a module failed so in CI)."""
    parse = ast.parse
    lock = threading.RLock()

    def serialized_parse(*args, **kwargs):
        with lock:
            collecting = gc.isenabled()
            gc.disable()
            try:
                return parse(*args, **kwargs)
            finally:
                if collecting:
                    gc.enable()

    ast.parse = serialized_parse


if (3, 11) <= sys.version_info < (3, 11, 8) or (3, 12) <= sys.version_info < (3, 12, 2):
    _serialize_ast_parse()


#: scripts/test.sh runs the suite with `--dist loadfile`: each module runs whole on one worker, so the brokers, JVMs
#: and SparkSessions of its module-scoped fixtures start once rather than once per worker. With
#: --no-loadscope-reorder (xdist otherwise hands out the modules with the most tests first: the parametrized unit
#: modules) xdist hands modules out in collection order, so the directories whose modules take minutes come first
#: and the suite ends on short unit modules that keep both workers busy to the end (a long module handed out last
#: would run alone).
SLOW_DIRECTORIES_FIRST = ("spark", "interop", "connect", "streams", "e2e", "cluster", "security", "integration", "ui",
                          "registry", "replication", "commands", "client", "server", "backends", "coordinator")


def pytest_collection_modifyitems(config, items) -> None:
    """Modules with slow-marked tests first, then by SLOW_DIRECTORIES_FIRST, then the rest; pytest's order within."""
    rank = {name: index for index, name in enumerate(SLOW_DIRECTORIES_FIRST)}
    tests_dir = os.path.dirname(__file__)
    slow_modules = {item.path for item in items if item.get_closest_marker("slow") is not None}

    def module_rank(item) -> tuple[int, int]:
        parts = os.path.relpath(item.path, tests_dir).split(os.sep)
        directory = parts[0] if len(parts) > 1 else ""
        return (0 if item.path in slow_modules else 1, rank.get(directory, len(rank)))

    items.sort(key=module_rank)
