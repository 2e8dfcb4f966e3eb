"""Suite-wide settings.

Hypothesis explores new random examples on every developer run (that is how it finds bugs); under CI (CI=true) it
runs a fixed, derandomized set instead, so a landing is judged on the same examples every time and a red CI always
reproduces. A failure found locally is fixed, and its example pinned with @example when it is worth keeping. CI
has no per-example deadline: a timing limit on a shared, loaded machine fails for the machine, not the code (speed
is measured in bench/).
"""

from __future__ import annotations

import ast
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
    3.11.7). One parse at a time avoids it."""
    parse = ast.parse
    lock = threading.RLock()

    def serialized_parse(*args, **kwargs):
        with lock:
            return parse(*args, **kwargs)

    ast.parse = serialized_parse


if (3, 11) <= sys.version_info < (3, 11, 8) or (3, 12) <= sys.version_info < (3, 12, 2):
    _serialize_ast_parse()
