"""What the Java interop tests share: the compiled programs of tests/interop/java, one kfk broker per module, and
running a program or one of Kafka's tools so that a failure shows what the JVM said.

Test modules import the fixtures by name (`from tests.interop.jvm import java_programs, kfk_server`) so that
pytest registers them there.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from kfk.testing.apache_kafka import compile_java, run_java, run_kafka_tool
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES

JAVA_SOURCES = Path(__file__).parent / "java"


@pytest.fixture(scope="session")
def java_programs(kafka_classpath_fixture: str) -> Path:
    """The classes of tests/interop/java/*.java, compiled against Kafka's jars (once per source change)."""
    return compile_java(JAVA_SOURCES, kafka_classpath_fixture)


@pytest.fixture(scope="module")
def kfk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One kfk broker for a module's tests (each JVM run costs seconds; a broker per test would add more). Tests
    use names of their own (unique_name) so they never see each other's topics or groups."""
    broker = start_broker(tmp_path_factory.mktemp("kfk-interop"), dict(TEST_OVERRIDES))
    yield broker
    code = broker.stop()
    assert code == 0, f"kfk broker exited with {code}:\n{broker.output()[-4000:]}"


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def run_program(classes: Path, main_class: str, args: list[str], timeout: float = 180) -> dict[str, dict]:
    """Run one of the Java programs; it must exit 0. Returns its JSON lines keyed by their "check" (a program
    prints each check once, except JavaProducer, whose lines are keyed by topic instead)."""
    result = run_java(main_class, args, extra_classpath=[classes], timeout=timeout)
    assert result.returncode == 0, f"{main_class} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines, f"{main_class} printed no result:\n{result.stdout}\n{result.stderr}"
    keyed: dict[str, dict] = {}
    for line in lines:
        key = line["topic"] if line["check"] == "produce" else line["check"]
        assert key not in keyed, f"{main_class} printed {key} twice"
        keyed[key] = line
    return keyed


def kafka_tool(tool: str, args: list[str], *, ok: bool = True, input: str | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess:
    """One of Kafka's kafka-*.sh tools; with ok=True it must exit 0 (its output is shown if it did not)."""
    result = run_kafka_tool(tool, args, input=input, timeout=timeout)
    if ok:
        assert result.returncode == 0, f"kafka-{tool} {args} exited {result.returncode}:\n{result.stdout}\n" \
                                       f"{result.stderr}"
    return result
