"""kcat -L (Debian's kcat, librdkafka 2.0.2): it must get past ApiVersions and read our Metadata."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (scripts/test.sh installs it)"),
]


def test_kcat_lists_brokers_and_topics(kfk_broker: str) -> None:
    client = AdminClient({"bootstrap.servers": kfk_broker})
    futures = client.create_topics([NewTopic("seen-by-kcat", 2, 1)])
    futures["seen-by-kcat"].result(timeout=10)
    listing = subprocess.run(["kcat", "-b", kfk_broker, "-L", "-J", "-m", "5"], capture_output=True, text=True,
                             timeout=30)
    assert listing.returncode == 0, listing.stderr
    metadata = json.loads(listing.stdout)
    assert [(b["id"], b["name"]) for b in metadata["brokers"]] == [(1, kfk_broker)]
    assert metadata["controllerid"] == 1
    (topic,) = metadata["topics"]
    assert topic["topic"] == "seen-by-kcat"
    assert [(p["partition"], p["leader"], p["replicas"], p["isrs"]) for p in topic["partitions"]] == [
        (0, 1, [{"id": 1}], [{"id": 1}]), (1, 1, [{"id": 1}], [{"id": 1}])]
