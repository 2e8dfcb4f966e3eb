"""Every command's --help on an 80-column terminal: nothing cut, no line wider than the terminal, every option name
whole, and no metavar beside a flag."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import typer.main
from typer.testing import CliRunner

from kfk.cli import app

COLUMNS = 80


def _paths(command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    found = [(path, command)]
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        found += _paths(sub, path + (name,))
    return found


COMMANDS = _paths(typer.main.get_command(app))


def _check(output: str, command) -> None:
    lines = output.splitlines()
    assert lines and lines[0].startswith("Usage: ")
    assert all(len(line) <= COLUMNS for line in lines), [line for line in lines if len(line) > COLUMNS]
    assert "…" not in output and "<bool>" not in output
    for param in command.params:
        for name in [*param.opts, *param.secondary_opts]:
            if name.startswith("-") and not getattr(param, "hidden", False):
                assert re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])", output), f"{name} is cut or missing"
    for param in command.params:
        if getattr(param, "is_flag", False) and not getattr(param, "hidden", False):
            flag_line = next(line for line in lines if re.search(rf"(?<![\w.-]){re.escape(param.opts[0])}\b", line))
            assert "<" not in flag_line.split(param.opts[-1], 1)[1].split("  ", 1)[0], flag_line


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(path) or "kfk" for path, _ in COMMANDS])
def test_help_fits_80_columns(path: tuple[str, ...], command) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(COLUMNS)}, terminal_width=COLUMNS)
    assert result.exit_code == 0, result.output
    _check(result.output, command)


@pytest.mark.parametrize("path", [(), ("configs",), ("console-produce",), ("spark-export",)], ids=" ".join)
def test_help_of_the_real_executable_at_80_columns(path: tuple[str, ...]) -> None:
    """The same through `python -m kfk` on an 80-column terminal (COLUMNS, as a shell exports it)."""
    command = dict(COMMANDS)[path]
    result = subprocess.run([sys.executable, "-m", "kfk", *path, "--help"], capture_output=True, text=True,
                            env=dict(os.environ, COLUMNS=str(COLUMNS)), timeout=60)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    _check(result.stdout, command)
