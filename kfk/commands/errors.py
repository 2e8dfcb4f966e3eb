"""How commands fail: one line on stderr that says what to do, and a non-zero exit code (no traceback)."""

from __future__ import annotations

from typing import NoReturn

import typer


def fail(message: str, code: int = 1) -> NoReturn:
    typer.secho(f"kfk: {message}", err=True, fg=typer.colors.RED)
    raise typer.Exit(code)
