"""Every option's value in `kfk ... --help` is named as Kafka's tools and docs name it (--topic TOPIC,
--bootstrap-server BOOTSTRAP-SERVER, --format [parquet|json|csv|orc]), never as a Python type (Typer's default:
<str>, <list[str]>, <int range>)."""

from __future__ import annotations

import re

import click
import pytest
from typer.testing import CliRunner

from kfk.cli import app
from tests.commands.test_80_columns import COMMANDS

#: What a Python type looks like in help text, Typer's spellings included.
TYPE_REPR = re.compile(r"list\[|str\]|Optional|<[^<>\s]*\[[^<>]*\]>|<(?:str|int|float|bool|path|datetime|"
                       r"(?:int|float) range)>", re.IGNORECASE)
#: A value name: words in capitals joined by '-' (or '.', as Kafka's --producer.config), or the choices.
VALUE_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:[-.][A-Z0-9]+)*|\[[a-z0-9_.-]+(?:\|[a-z0-9_.-]+)+\]")


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(path) or "kfk" for path, _ in COMMANDS])
def test_every_value_is_named_as_kafka_names_it(path: tuple[str, ...], command) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert TYPE_REPR.search(result.output) is None, TYPE_REPR.search(result.output)
    context = click.Context(command, info_name=" ".join(("kfk", *path)))
    for param in command.params:
        record = param.get_help_record(context)
        if record is None or getattr(param, "is_flag", False):
            continue
        term = record[0]
        if param.param_type_name == "argument":
            assert VALUE_NAME.fullmatch(term), term
            assert f"[{term}]" in result.output or f"{{{term}}}" in result.output  # the usage line
        else:
            names, value = term.rsplit(" ", 1)
            assert set(names.split(", ")) == set(param.opts) and VALUE_NAME.fullmatch(value), term
        assert term in result.output
