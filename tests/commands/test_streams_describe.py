"""`kfk streams describe MODULE:NAME` prints a kfk.streams topology as Topology.describe() does (whose text is
checked beside Apache Kafka Streams 4.4.0 in tests/streams), from a builder, a topology or a function, and says
in one line what is wrong with a reference it cannot use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kfk.streams import Serdes, StreamsBuilder

APP = '''
from kfk.streams import Serdes, StreamsBuilder

builder = StreamsBuilder()
(builder.stream("lines").flat_map_values(str.split).group_by(lambda key, word: word).count("counts")
 .to_stream().to("word-counts", value_serde=Serdes.long()))
topology = builder.build()


def make():
    return builder


broken = 42
'''


def expected() -> str:
    builder = StreamsBuilder()
    (builder.stream("lines").flat_map_values(str.split).group_by(lambda key, word: word).count("counts")
     .to_stream().to("word-counts", value_serde=Serdes.long()))
    return f"{builder.build().describe()}\n"


def describe(directory: Path, reference: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfk", "streams", "describe", reference], cwd=directory,
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    (tmp_path / "wordcount_describe_app.py").write_text(APP)
    return tmp_path


@pytest.mark.parametrize("name", ["builder", "topology", "make"])
def test_prints_the_topology_of_a_builder_a_topology_or_a_function(app_dir: Path, name: str) -> None:
    result = describe(app_dir, f"wordcount_describe_app:{name}")
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected()
    assert result.stdout.startswith("Topologies:\n   Sub-topology: 0\n")


@pytest.mark.parametrize(("reference", "message"), [
    ("wordcount_describe_app", "expected MODULE:NAME"),
    ("no_such_module_here:builder", "cannot import no_such_module_here: ModuleNotFoundError"),
    ("wordcount_describe_app:nothing", "wordcount_describe_app has no nothing"),
    ("wordcount_describe_app:broken", "wordcount_describe_app:broken is a int, not a Topology or a StreamsBuilder"),
])
def test_a_reference_it_cannot_use_is_one_line(app_dir: Path, reference: str, message: str) -> None:
    result = describe(app_dir, reference)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(f"kfk: {message}") and len(result.stderr.splitlines()) == 1, result.stderr
