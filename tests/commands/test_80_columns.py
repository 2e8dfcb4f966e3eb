"""An 80-column terminal: every command's --help (nothing cut, no line wider than the terminal, every option name
whole, no metavar beside a flag), and tables too wide for it (Kafka's plain lines, header cells whole)."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

import pytest
import typer.main
from typer.testing import CliRunner

from kfk.cli import app
from kfk.commands.client_options import table

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


HEADERS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID")


def test_a_table_too_wide_for_the_terminal_prints_kafkas_plain_lines() -> None:
    from rich.console import Console

    def render(width: int) -> list[str]:
        grid = table(*HEADERS)
        grid.add_row("g", "orders", "0", "12345", "12350", "5", "consumer-1-9f8e7d6c-aaaa-bbbb", "/127.0.0.1", "c-1")
        console = Console(width=width, force_terminal=True, no_color=True, soft_wrap=True, record=True)
        console.print(grid)
        return console.export_text().splitlines()

    narrow = render(COLUMNS)
    assert narrow[0].split() == list(HEADERS) and "…" not in "".join(narrow)
    assert narrow[1].split() == ["g", "orders", "0", "12345", "12350", "5", "consumer-1-9f8e7d6c-aaaa-bbbb",
                                 "/127.0.0.1", "c-1"]
    assert narrow[0].index("LAG") == narrow[1].index(" 5 ") + 1  # columns aligned
    wide = render(200)  # room enough: the rich table, with its rule under the header
    assert len(wide) == 3 and set(wide[1].strip()) <= set("─-+ ") and re.findall(r"[A-Z-]+", wide[0]) == list(HEADERS)


def _on_a_terminal(*args: str) -> str:
    """`python -m kfk ARGS` with a pseudo-terminal of COLUMNS columns as its stdout; what it printed."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(sys.executable, [sys.executable, "-m", "kfk", *args], dict(os.environ, COLUMNS=str(COLUMNS)))
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.waitpid(pid, 0)
    os.close(fd)
    return re.sub(r"\x1b\[[0-9;]*m", "", b"".join(chunks).decode()).replace("\r\n", "\n")


@pytest.mark.integration
def test_consumer_groups_describe_on_an_80_column_terminal(kfk_broker: str) -> None:
    server = ["--bootstrap-server", kfk_broker]
    run = lambda *args, **kwargs: subprocess.run([sys.executable, "-m", "kfk", *args, *server],  # noqa: E731
                                                 capture_output=True, text=True, timeout=60, **kwargs)
    assert run("topics", "create", "--topic", "narrow").returncode == 0
    assert run("console-produce", "--topic", "narrow", input="one\n").returncode == 0
    assert run("console-consume", "--topic", "narrow", "--group", "a-group-with-a-long-name", "--from-beginning",
               "--max-messages", "1").returncode == 0
    lines = _on_a_terminal("consumer-groups", "--describe", "--group", "a-group-with-a-long-name", *server)
    lines = [line for line in lines.splitlines() if line.strip() and "no active members" not in line]  # stderr
    assert lines[0].split() == list(HEADERS), lines
    assert lines[1].split()[:6] == ["a-group-with-a-long-name", "narrow", "0", "1", "1", "0"], lines
