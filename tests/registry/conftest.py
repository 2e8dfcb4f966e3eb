"""Fixtures of the schema registry's tests: one kfk broker and one `kfk schema-registry start` (a real subprocess on
an ephemeral port, its address read from the line it prints once it serves) for the session of each xdist worker;
tests use subjects and topics of their own, and those that restart or kill registries start their own on a
_schemas topic and group of their own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES

_ADDRESS = re.compile(r"kfk schema registry on (http://\S+)/")
_REPO = Path(__file__).resolve().parents[2]


class RegistryProcess:
    """A running `kfk schema-registry start`; ``url`` is its address (no trailing slash)."""

    def __init__(self, bootstrap_servers: str, topic: str, stderr_path: Path, group_id: str = "schema-registry",
                 extra: tuple[str, ...] = ()) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(_REPO), os.environ.get("PYTHONPATH")])))
        self.stderr_path = stderr_path
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kfk", "schema-registry", "start", "--bootstrap-server", bootstrap_servers,
             "--listeners", "http://127.0.0.1:0", "--kafkastore-topic", topic, "--group-id", group_id, *extra],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
        self.url = self._wait_for_address()

    def _wait_for_address(self) -> str:
        lines: list[str] = []
        found: list[str] = []

        def read() -> None:
            assert self.process.stderr is not None
            with open(self.stderr_path, "w") as log:
                for line in self.process.stderr:
                    log.write(line)
                    log.flush()
                    lines.append(line)
                    if not found and (match := _ADDRESS.search(line)):
                        found.append(match.group(1))
                        ready.set()
            ready.set()

        ready = threading.Event()
        threading.Thread(target=read, daemon=True).start()
        ready.wait(90)
        if not found:
            self.stop()
            raise AssertionError("the schema registry did not start:\n" + "".join(lines))
        return found[0]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(5)


@pytest.fixture(scope="session")
def registry_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("registry-broker"), dict(TEST_OVERRIDES), timeout=60)
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def registry_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., RegistryProcess]]:
    started: list[RegistryProcess] = []

    def factory(bootstrap_servers: str, topic: str = "_schemas", **kwargs) -> RegistryProcess:
        log = tmp_path_factory.mktemp("registry") / "registry.log"
        registry = RegistryProcess(bootstrap_servers, topic, log, **kwargs)
        started.append(registry)
        return registry

    yield factory
    for registry in started:
        registry.stop()


@pytest.fixture(scope="session")
def registry(registry_broker: BrokerProcess, registry_factory: Callable[..., RegistryProcess]) -> RegistryProcess:
    return registry_factory(registry_broker.bootstrap_servers)
