"""Clients in other languages against kfk: franz-go (Go) and kafkajs (Node). One broker per test module (each test
uses its own topics and groups); the programs are built once into the download cache (tests/interop/programs.py).
Without go, node or npm these tests fail: CI installs them (scripts/test.sh)."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.interop.programs import ToolchainMissing, franz_go_program, kafkajs_node_path, node_command


@pytest.fixture(scope="module")
def interop_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("interop-broker"), TEST_OVERRIDES)
    yield broker
    broker.stop()


@pytest.fixture
def bootstrap(interop_broker: BrokerProcess) -> str:
    return interop_broker.bootstrap_servers


@pytest.fixture
def topic_name() -> str:
    return f"interop-{uuid.uuid4().hex[:10]}"


def run_json(args: list[str], env: dict[str, str] | None = None, timeout: float = 90) -> Any:
    """Run one interop command; its stdout is one JSON document. A non-zero exit fails the test with its stderr."""
    result = subprocess.run(args, capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env,
                            timeout=timeout)
    assert result.returncode == 0, f"{Path(args[0]).name} {args[1]} exited {result.returncode}: {result.stderr}"
    return json.loads(result.stdout)


@pytest.fixture(scope="session")
def franz_go() -> Callable[..., Any]:
    """`franz_go(command, **flags)`: run the franz-go program (tests/interop/go) and return its JSON answer."""
    try:
        binary = franz_go_program()
    except ToolchainMissing as error:
        pytest.fail(str(error))

    def run(command: str, **flags: object) -> Any:
        args = [str(binary), command]
        for name, value in flags.items():
            for item in value if isinstance(value, list) else [value]:
                args += [f"-{name.replace('_', '-')}", str(item)]
        return run_json(args)

    return run


@pytest.fixture(scope="session")
def kafkajs() -> Callable[..., Any]:
    """`kafkajs(command, *args)`: run tests/interop/node/interop.js with kafkajs and return its JSON answer."""
    try:
        env = dict(os.environ, NODE_PATH=str(kafkajs_node_path()), KAFKAJS_NO_PARTITIONER_WARNING="1")
        node_command()
    except ToolchainMissing as error:
        pytest.fail(str(error))

    def run(command: str, *args: object) -> Any:
        return run_json(node_command(command, *map(str, args)), env=env)

    return run
