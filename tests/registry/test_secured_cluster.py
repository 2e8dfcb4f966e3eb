"""`kfk schema-registry start --command-config`: the registry reaches a SASL-secured cluster with the client
properties file every kfk tool takes (its store, its election and its forwarding all use it); without the file it
refuses at once, in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from kfk.testing.broker import BrokerProcess, start_broker
from tests.registry.conftest import RegistryProcess
from tests.security.test_sasl_clients import sasl_overrides

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("registry-sasl"), sasl_overrides(), listener_name="SASL_PLAINTEXT",
                          timeout=60)
    yield broker
    broker.stop()


def test_registry_on_a_sasl_cluster_with_its_properties_file(sasl_broker: BrokerProcess, tmp_path: Path) -> None:
    properties = tmp_path / "client.properties"
    properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                          "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                          'username="admin" password="admin-secret";\n')
    registry = RegistryProcess(sasl_broker.bootstrap_servers, "_schemas", tmp_path / "registry.log",
                               extra=("--command-config", str(properties)))
    try:
        client = SchemaRegistryClient({"url": registry.url})
        schema = json.dumps({"type": "record", "name": "Secret", "fields": [{"name": "a", "type": "int"}]})
        assert client.register_schema("secret-value", Schema(schema, "AVRO")) == 1
        assert client.get_versions("secret-value") == [1]
    finally:
        registry.stop()

    refused = subprocess.run(
        [sys.executable, "-m", "kfk", "schema-registry", "start", "--bootstrap-server", sasl_broker.bootstrap_servers,
         "--listeners", "http://127.0.0.1:0"], capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2])))
    assert refused.returncode == 1
    assert refused.stderr.startswith("kfk: ") and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
