"""Internal topics are the cluster's: neither `kfk topics delete/alter` nor any client's admin may delete them or
change their partition count (the broker answers INVALID_REQUEST)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions


def kfk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfk", *args], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory):
    """A broker whose __consumer_offsets exists (a group consumed from it)."""
    from kfk.testing.broker import start_broker

    broker = start_broker(tmp_path_factory.mktemp("internal"), {"offsets.topic.num.partitions": "3"})
    address = broker.bootstrap_servers
    produced = subprocess.run([sys.executable, "-m", "kfk", "console-produce", "--topic", "t", "--bootstrap-server",
                               address], input="a\n", capture_output=True, text=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    consumed = kfk("console-consume", "--topic", "t", "--group", "g", "--from-beginning", "--max-messages", "1",
                   "--bootstrap-server", address)
    assert consumed.returncode == 0, consumed.stderr
    yield address
    broker.stop()


@pytest.mark.parametrize("topic", ["__consumer_offsets", "__transaction_state", "__cluster_metadata"])
def test_the_tool_refuses_to_delete_an_internal_topic(bootstrap: str, topic: str) -> None:
    deleted = kfk("topics", "delete", "--topic", topic, "--bootstrap-server", bootstrap)
    assert deleted.returncode == 1
    assert deleted.stderr.splitlines() == [f"kfk: {topic} is an internal topic: it cannot be deleted"]


def test_the_tool_refuses_to_change_the_partition_count_of_an_internal_topic(bootstrap: str) -> None:
    altered = kfk("topics", "alter", "--topic", "__consumer_offsets", "--partitions", "60",
                  "--bootstrap-server", bootstrap)
    assert altered.returncode == 1
    assert altered.stderr.splitlines() == [
        "kfk: __consumer_offsets is an internal topic: its number of partitions cannot be changed"]
    described = kfk("topics", "describe", "--topic", "__consumer_offsets", "--json", "--bootstrap-server", bootstrap)
    assert '"partition_count": 3' in described.stdout


def _error_of(future) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=30)
    return raised.value.args[0]


@pytest.mark.parametrize("topic", ["__consumer_offsets", "__cluster_metadata"])
def test_the_broker_refuses_deleting_an_internal_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    error = _error_of(admin.delete_topics([topic], operation_timeout=10)[topic])
    assert error.code() == KafkaError.INVALID_REQUEST  # librdkafka does not pass DeleteTopics' message on
    assert "__consumer_offsets" in admin.list_topics(timeout=10).topics


def test_the_broker_says_why_in_the_error_message(bootstrap: str) -> None:
    from kfk.client import Admin
    from kfk.errors import InvalidRequestError

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        error = admin.delete_topics(["__transaction_state"])["__transaction_state"]
    assert isinstance(error, InvalidRequestError)
    assert str(error).endswith(": Topic __transaction_state is an internal topic and cannot be deleted.")


def test_the_broker_refuses_changing_the_partition_count_of_an_internal_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    error = _error_of(admin.create_partitions([NewPartitions("__consumer_offsets", 10)])["__consumer_offsets"])
    assert error.code() == KafkaError.INVALID_REQUEST
    assert "The number of partitions of the internal topic __consumer_offsets cannot be changed." in error.str()
    assert len(admin.list_topics(timeout=10).topics["__consumer_offsets"].partitions) == 3
