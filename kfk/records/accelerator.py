"""Whether the record codec's C accelerator (kfk.records._accel) is used, decided once at import.

The extension is an optional build (setup.py: a machine without a C compiler still installs kfk), so the pure-Python
functions it replaces stay the reference implementation: batch.decode_records_python, builder.encode_record_python
and builder.encode_values_python. The C functions take the same arguments and give equal results and the same
CorruptRecordError on malformed input (tests/records/test_accelerator.py runs both side by side).

Setting KFK_NO_ACCELERATOR to anything but "" or "0" forces the Python implementations for the whole process (and
the brokers and tools it starts, which inherit the environment): to run a test suite or a benchmark on the reference.
"""

from __future__ import annotations

import os
from types import ModuleType

__all__ = ["DISABLE_ENVIRONMENT_VARIABLE", "accelerator", "load_accelerator"]

DISABLE_ENVIRONMENT_VARIABLE = "KFK_NO_ACCELERATOR"


def load_accelerator() -> ModuleType | None:
    """The compiled module, or None when it was not built or the environment disables it."""
    if os.environ.get(DISABLE_ENVIRONMENT_VARIABLE, "") not in ("", "0"):
        return None
    try:
        from kfk.records import _accel  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _accel


accelerator = load_accelerator()
"""kfk.records._accel when it is in use, else None (the codec's modules bind their functions from this)."""
