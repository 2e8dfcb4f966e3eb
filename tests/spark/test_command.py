"""`kfk spark-export` refuses bad input with one clear line before Spark starts, and says what the machine lacks.

"Before Spark starts" is observed, not assumed: JAVA_HOME points at a fake `java` that leaves a mark when run, and
Java is the first thing a Spark start (or kfk's Java check, which comes just before it) touches."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from typer.testing import CliRunner  # noqa: E402

from kfk.cli import app  # noqa: E402
from kfk.spark.environment import parse_java_version  # noqa: E402
from tests.spark.conftest import create_topic  # noqa: E402

pytestmark = pytest.mark.spark


def export(*args: str) -> Any:
    return CliRunner().invoke(app, ["spark-export", *args], catch_exceptions=False)


@pytest.fixture
def topic(kfk_broker: str) -> str:
    create_topic(kfk_broker, "orders", 2)
    return "orders"


@pytest.mark.parametrize(("arguments", "message"), [
    (["--topic", "missing"], "topic 'missing' does not exist"),
    (["--topic", "orders", "--starting-offsets", '{"orders":{"0":1}'], "not valid JSON"),
    (["--topic", "orders", "--starting-offsets", '{"orders":{"0":1}}'], "not specified: orders-1"),
    (["--topic", "orders", "--ending-offsets", '{"orders":{"0":5,"1":0}}'], "past its end"),
    (["--topic", "orders", "--decode", "value=yaml"], "--decode"),
    (["--topic", "orders", "--stream"], "--stream needs --checkpoint"),
    (["--topic", "orders", "--stream", "--checkpoint", "ck", "--trigger", "soon"], "--trigger 'soon'"),
    (["--pattern", "nothing-.*"], "no topic matches the pattern"),
])
def test_bad_input_fails_before_spark(arguments: list[str], message: str, kfk_broker: str, topic: str,
                                      fake_java: Path, tmp_path: Path) -> None:
    result = export("--bootstrap-server", kfk_broker, "--output", str(tmp_path / "out"), *arguments)
    assert result.exit_code == 1
    assert message in result.output
    assert result.output.startswith("kfk: ") and "Traceback" not in result.output
    assert not fake_java.exists(), "Java was run: the error came too late"


def test_unreachable_bootstrap_fails_fast(fake_java: Path, tmp_path: Path) -> None:
    result = export("--bootstrap-server", "127.0.0.1:1", "--topic", "orders", "--output", str(tmp_path / "out"))
    assert result.exit_code == 1 and "cannot connect to any bootstrap server (127.0.0.1:1)" in result.output
    assert not fake_java.exists()


def test_an_existing_output_dir_needs_overwrite(kfk_broker: str, topic: str, fake_java: Path,
                                               tmp_path: Path) -> None:
    output = tmp_path / "reports"
    output.mkdir()
    (output / "q1.csv").write_text("precious\n")
    result = export("--bootstrap-server", kfk_broker, "--topic", topic, "--output", str(output))
    assert result.exit_code == 1 and "exists and is not a kfk export" in result.output
    assert "--overwrite" in result.output
    assert (output / "q1.csv").read_text() == "precious\n" and not fake_java.exists()
    streaming = export("--bootstrap-server", kfk_broker, "--topic", topic, "--output", str(output), "--stream",
                       "--checkpoint", str(tmp_path / "ck"))
    assert streaming.exit_code == 1 and "is not a streaming kfk export" in streaming.output


def test_old_java_is_reported_after_the_input_checks(kfk_broker: str, topic: str, fake_java: Path,
                                                     tmp_path: Path) -> None:
    result = export("--bootstrap-server", kfk_broker, "--topic", topic, "--output", str(tmp_path / "out"))
    assert result.exit_code == 1
    assert "is Java 11. Spark needs Java 17 or later" in result.output and "JAVA_HOME" in result.output
    assert fake_java.exists()


def test_missing_pyspark_names_the_extra_to_install(tmp_path: Path) -> None:
    script = ("import sys; sys.modules['pyspark'] = None; sys.argv = ['kfk', 'spark-export', '--topic', 't', "
              f"'--output', {str(tmp_path / 'out')!r}]; from kfk.cli import main; main()")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "pyspark is not installed" in result.stderr and "pip install 'kfk[spark]'" in result.stderr


def test_java_version_strings() -> None:
    assert parse_java_version('openjdk version "17.0.15" 2025-04-15') == 17
    assert parse_java_version('java version "1.8.0_392"') == 8
    assert parse_java_version('openjdk version "21" 2023-09-19') == 21
    assert parse_java_version("no version here") is None
