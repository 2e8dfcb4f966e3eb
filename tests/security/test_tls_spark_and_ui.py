"""`kfk spark-export` and `kfk ui` over TLS: both take `--command-config` and their clients reach conftest's
tls_broker through the listener that requires a client certificate."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from .conftest import Certificates, tls_address


def _mtls_properties(certificates: Certificates, path: Path) -> Path:
    path.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={certificates.ca}\n"
                    f"ssl.keystore.type=PEM\nssl.keystore.location={certificates.client.pem}\n")
    return path


def _produce(tls_broker, certificates: Certificates, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": tls_address(tls_broker, "SSL"), "security.protocol": "SSL",
                         "ssl.ca.location": str(certificates.ca)})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0


@pytest.mark.spark
def test_spark_export_reads_over_tls_with_the_command_config(tls_broker, certificates, tmp_path) -> None:
    pytest.importorskip("pyspark")
    import pyarrow.parquet as pq

    topic = f"tls-spark-{uuid.uuid4().hex[:6]}"
    values = [f"row-{index}".encode() for index in range(100)]
    _produce(tls_broker, certificates, topic, values)
    output = tmp_path / "export"
    properties = _mtls_properties(certificates, tmp_path / "client.properties")
    result = subprocess.run(
        [sys.executable, "-m", "kfk", "spark-export", "--master", "local[1]", "--bootstrap-server",
         tls_address(tls_broker, "MTLS"), "--command-config", str(properties), "--topic", topic, "--output",
         str(output), "--json"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout)["rows"] == 100
    assert sorted(pq.read_table(output).column("value").to_pylist()) == sorted(values)


def test_the_web_console_reads_over_tls_with_the_command_config(tls_broker, certificates, tmp_path) -> None:
    topic = f"tls-ui-{uuid.uuid4().hex[:6]}"
    _produce(tls_broker, certificates, topic, [b"shown"])
    properties = _mtls_properties(certificates, tmp_path / "client.properties")
    stderr_path = tmp_path / "ui.stderr"
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "kfk", "ui", "--bootstrap-server",
                                    tls_address(tls_broker, "MTLS"), "--command-config", str(properties),
                                    "--port", "0"], stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        deadline, url = time.monotonic() + 30, None
        while url is None and time.monotonic() < deadline and process.poll() is None:
            text = stderr_path.read_text()
            url = text.split("kfk console on ", 1)[1].split()[0] if "kfk console on " in text else None
            time.sleep(0.1)
        assert url, stderr_path.read_text()
        with urllib.request.urlopen(url + "topics", timeout=30) as response:
            assert topic in response.read().decode()
    finally:
        process.terminate()
        process.wait(10)
