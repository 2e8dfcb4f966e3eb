"""How commands fail: one line on stderr that says what to do, and a non-zero exit code (no traceback)."""

from __future__ import annotations

import os
import signal
import sys
from typing import NoReturn

import typer


def fail(message: str, code: int = 1) -> NoReturn:
    typer.secho(f"kfk: {message}", err=True, fg=typer.colors.RED)
    raise typer.Exit(code)


def exit_on_broken_pipe() -> NoReturn:
    """The reader of our stdout went away (`kfk ... | head`): stop quietly with the status a process killed by
    SIGPIPE has, as other Unix tools do. Python ignores SIGPIPE (a broker or client socket must not kill the
    process), so the write raised BrokenPipeError instead; stdout is pointed at /dev/null so that flushing what is
    still buffered at exit does not raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    raise typer.Exit(128 + signal.SIGPIPE)
