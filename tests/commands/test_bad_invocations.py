"""Every user error is one line on stderr and a non-zero exit, never a traceback: a table of bad invocations of
`python -m kfk`, each run as a subprocess (against a real broker where one is needed)."""

from __future__ import annotations

import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Bad:
    """`args` and `line` may name {broker}, {busy_port} and {tmp} (a fresh dir: {tmp}/file is a regular file)."""

    name: str
    args: tuple[str, ...]
    line: str
    """The start of the one line expected on stderr."""
    exit_code: int = 1
    stdin: str = ""
    untouched: str | None = None
    """A path that must not exist afterwards (nothing created or formatted)."""


LISTEN = ("--override", "listeners=PLAINTEXT://127.0.0.1:0")

TABLE = [
    Bad("port in use", ("server", "start", "--override", "listeners=PLAINTEXT://127.0.0.1:{busy_port}",
                        "--override", "log.dirs={tmp}/new"),
        "kfk: cannot listen on PLAINTEXT://127.0.0.1:{busy_port}: ", untouched="{tmp}/new"),
    Bad("log dir not creatable", ("server", "start", *LISTEN, "--override", "log.dirs={tmp}/file/data"),
        "kfk: cannot create log dir {tmp}/file/data: Not a directory"),
    Bad("log dir not writable", ("server", "start", *LISTEN, "--override", "log.dirs=/sys"),
        "kfk: log dir /sys is not writable: "),
    Bad("malformed listeners", ("server", "start", "--override", "listeners=localhost:9092",
                                "--override", "log.dirs={tmp}/new"),
        "kfk: invalid listeners: listener 'localhost:9092' is not NAME://host:port", untouched="{tmp}/new"),
    Bad("broker-only without a quorum", ("server", "start", *LISTEN, "--override", "process.roles=broker",
                                         "--override", "node.id=2", "--override", "log.dirs={tmp}/new"),
        "kfk: If using process.roles, either controller.quorum.bootstrap.servers must contain the set of bootstrap "
        "controllers or controller.quorum.voters must contain a parseable set of controllers.", untouched="{tmp}/new"),
    Bad("metadata log segments below 8 MiB", ("server", "start", *LISTEN, "--override", "log.dirs={tmp}/new",
                                              "--override", "metadata.log.segment.bytes=1048576"),
        "kfk: Cannot set metadata.log.segment.bytes below 8388608: 1048576", untouched="{tmp}/new"),
    Bad("unknown log level", ("server", "start", "--log-level", "loud", "--override", "log.dirs={tmp}/new"),
        "kfk: unknown --log-level 'loud': use one of debug, info, warning, error", untouched="{tmp}/new"),
    Bad("log.file not writable", ("server", "start", *LISTEN, "--override", "log.dirs={tmp}/new",
                                  "--override", "log.file={tmp}/file/kfk.log"),
        "kfk: cannot open log.file {tmp}/file/kfk.log: Not a directory", untouched="{tmp}/new"),
    Bad("zookeeper data dir", ("zookeeper", "start", "--port", "{busy_port}", "--data-dir", "{tmp}/file/zk"),
        "kfk: cannot use --data-dir {tmp}/file/zk: Not a directory"),
    Bad("zookeeper port", ("zookeeper", "start", "--port", "99999", "--data-dir", "{tmp}/zk"),
        "kfk: --port 99999 is not a TCP port (1-65535)", untouched="{tmp}/zk"),
    Bad("unknown host", ("topics", "list", "--bootstrap-server", "no-such-host.invalid:9092"),
        "kfk: cannot connect to any bootstrap server (no-such-host.invalid:9092): cannot resolve host "
        "no-such-host.invalid: "),
    Bad("produce to a missing topic", ("console-produce", "--topic", "missing", "--bootstrap-server", "{broker}"),
        "kfk: topic 'missing' does not exist (UNKNOWN_TOPIC_OR_PARTITION) and the broker does not create topics on "
        "use (auto.create.topics.enable=false): kfk topics create --topic missing", stdin="a\n"),
    Bad("spark-export cannot write", ("spark-export", "--topic", "t", "--bootstrap-server", "{broker}",
                                      "--output", "{tmp}/file/out", "--format", "json"),
        "kfk: Spark job failed: Parent path is not a directory: file:{tmp}/file "
        "(org.apache.hadoop.fs.ParentNotDirectoryException)"),
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    """A broker that does not create topics on use, with one topic of records."""
    from kfk.testing.broker import start_broker

    process = start_broker(tmp_path_factory.mktemp("bad"), {"auto.create.topics.enable": "false"})
    address = process.bootstrap_servers
    for args, stdin in ((("topics", "create", "--topic", "t"), None), (("console-produce", "--topic", "t"), "1\n2\n")):
        done = subprocess.run([sys.executable, "-m", "kfk", *args, "--bootstrap-server", address], input=stdin,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    yield address
    process.stop()


@pytest.fixture
def busy_port():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


@pytest.mark.parametrize("bad", TABLE, ids=lambda bad: bad.name)
def test_a_bad_invocation_prints_one_line_and_exits_non_zero(bad: Bad, broker: str, busy_port: int,
                                                              tmp_path: Path) -> None:
    (tmp_path / "file").write_text("a regular file where a directory is expected\n")
    values = {"broker": broker, "busy_port": busy_port, "tmp": tmp_path}
    args = [arg.format(**values) for arg in bad.args]
    done = subprocess.run([sys.executable, "-m", "kfk", *args], input=bad.stdin, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == bad.exit_code, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(bad.line.format(**values)), done.stderr
    if bad.untouched is not None:
        assert not Path(bad.untouched.format(**values)).exists()


def test_a_closed_pipe_ends_the_command_quietly(broker: str) -> None:
    """`kfk ... | head -1`: the reader goes away, kfk stops as a process killed by SIGPIPE would, without a word."""
    with subprocess.Popen([sys.executable, "-m", "kfk", "console-produce", "--topic", "t", "--bootstrap-server",
                           broker], stdin=subprocess.PIPE, text=True) as producer:
        producer.communicate("x" * 200 + "\n" * 1 + ("y" * 200 + "\n") * 2000, timeout=60)
    assert producer.returncode == 0
    consumer = subprocess.Popen([sys.executable, "-m", "kfk", "console-consume", "--topic", "t", "--from-beginning",
                                 "--max-messages", "2000", "--bootstrap-server", broker],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert consumer.stdout.readline() == b"1\n"
    consumer.stdout.close()  # as `head -1` does once it has its line
    assert consumer.wait(60) == 141
    assert consumer.stderr.read() == b""
    consumer.stderr.close()
