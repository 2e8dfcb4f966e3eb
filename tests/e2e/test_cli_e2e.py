"""The real `kfk` executable against a real broker, the way a user runs it: create a topic, produce 1,000 lines,
consume them as a group, see lag 0, reset the group's offsets, and consume everything again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

KFK = shutil.which("kfk") or shutil.which("kfk", path=os.path.dirname(sys.executable))


def kfk(*args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    assert KFK is not None, "the kfk console script is not installed (pip install -e .)"
    return subprocess.run([KFK, *args], input=stdin, capture_output=True, text=True, timeout=timeout)


def test_create_produce_consume_describe_reset_consume_again(kfk_broker: str) -> None:
    server = ["--bootstrap-server", kfk_broker]
    created = kfk("topics", "create", "--topic", "e2e", "--partitions", "3", "--replication-factor", "1", *server)
    assert created.returncode == 0 and created.stdout == "Created topic e2e.\n", created.stderr

    lines = [f"line {n}" for n in range(1000)]
    produced = kfk("console-produce", "--topic", "e2e", *server, stdin="\n".join(lines) + "\n")
    assert produced.returncode == 0, produced.stderr

    consumed = kfk("console-consume", "--topic", "e2e", "--group", "e2e-group", "--from-beginning",
                   "--max-messages", "1000", *server)
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.splitlines()) == sorted(lines)
    assert consumed.stderr.strip().endswith("Processed a total of 1000 messages")

    described = kfk("consumer-groups", "--describe", "--group", "e2e-group", "--json", *server)
    assert described.returncode == 0, described.stderr
    rows = json.loads(described.stdout)[0]["offsets"]
    assert len(rows) == 3 and all(row["lag"] == 0 for row in rows)
    assert sum(row["log_end_offset"] for row in rows) == 1000

    table = kfk("consumer-groups", "--describe", "--group", "e2e-group", *server)
    assert table.returncode == 0 and "LAG" in table.stdout and "e2e-group" in table.stdout

    reset = kfk("consumer-groups", "--reset-offsets", "--group", "e2e-group", "--topic", "e2e", "--to-earliest",
                "--execute", *server)
    assert reset.returncode == 0, reset.stderr
    assert reset.stdout.count("e2e-group") == 3

    again = kfk("console-consume", "--topic", "e2e", "--group", "e2e-group", "--max-messages", "1000",
                "--timeout-ms", "20000", *server)
    assert again.returncode == 0, again.stderr
    assert sorted(again.stdout.splitlines()) == sorted(lines)
    assert "Processed a total of 1000 messages" in again.stderr


def test_errors_are_one_line_with_a_non_zero_exit_code(kfk_broker: str) -> None:
    unreachable = kfk("topics", "list", "--bootstrap-server", "127.0.0.1:1")
    assert unreachable.returncode == 1 and unreachable.stdout == ""
    assert unreachable.stderr.startswith("kfk: cannot connect to any bootstrap server")
    assert len(unreachable.stderr.strip().splitlines()) == 1

    unknown = kfk("topics", "describe", "--topic", "missing", "--bootstrap-server", kfk_broker)
    assert (unknown.returncode, unknown.stderr) == (1, "kfk: topic 'missing' does not exist\n")

    bad_config = kfk("topics", "create", "--topic", "x", "--config", "no.such.key=1", "--bootstrap-server",
                     kfk_broker)
    assert bad_config.returncode == 1 and "no.such.key" in bad_config.stderr
    assert len(bad_config.stderr.strip().splitlines()) == 1

    bad_flag = kfk("topics", "create", "--topik", "x")
    assert bad_flag.returncode == 2 and "No such option" in bad_flag.stderr

    traced = kfk("topics", "list", "--bootstrap-server", "127.0.0.1:1", "--debug")
    assert traced.returncode == 1 and "Traceback" in traced.stderr
