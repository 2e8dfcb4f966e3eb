"""Suite-wide settings.

Hypothesis explores new random examples on every developer run (that is how it finds bugs); under CI (CI=true) it
runs a fixed, derandomized set instead, so a landing is judged on the same examples every time and a red CI always
reproduces. A failure found locally is fixed, and its example pinned with @example when it is worth keeping. CI
has no per-example deadline: a timing limit on a shared, loaded machine fails for the machine, not the code (speed
is measured in bench/).
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True, deadline=None)
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    settings.load_profile("ci")
