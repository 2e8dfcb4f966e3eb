"""SIGTERM for the commands that serve HTTP through uvicorn: Connect workers, the schema registry, the console."""

from __future__ import annotations

import signal

#: What a process ended by SIGTERM reports to a shell (128 + 15).
SIGTERM_EXIT_CODE = 128 + signal.SIGTERM


def unwind_on_sigterm() -> None:
    """Make SIGTERM raise SystemExit(143) in the main thread. uvicorn stops serving on SIGTERM and then raises the
    signal again with the handler it found; Python's default one ends the process on the spot, skipping the
    command's `finally`: a Connect worker's tasks are not stopped (their last records unsent, their offsets
    uncommitted, as Kafka's shutdown hook would have them), a registry stays in its group until its session times
    out. With this handler the command unwinds and still exits with the code of a process ended by SIGTERM."""

    def exit_on_sigterm(signum: int, frame) -> None:
        raise SystemExit(SIGTERM_EXIT_CODE)

    signal.signal(signal.SIGTERM, exit_on_sigterm)
