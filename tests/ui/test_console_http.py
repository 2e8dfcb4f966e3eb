"""The web console over plain HTTP against a real kfk broker: read-only mode, bad input answered with a page that
says what is wrong (never a server error), and a console started while the cluster is down."""

from __future__ import annotations

import html
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.cluster.helpers import wait_until
from tests.ui.conftest import ConsoleSession


@pytest.fixture
def console(kfk_broker, console_factory) -> ConsoleSession:
    return ConsoleSession(console_factory(kfk_broker).url)


def test_read_only_console_refuses_changes_and_hides_forms(kfk_broker, console_factory) -> None:
    console = ConsoleSession(console_factory(kfk_broker, "--read-only").url)
    status, body = console.get("topics")
    assert status == 200 and "read-only" in body and 'id="create-topic"' not in body
    status, _, body = console.post("topics", {"name": "nope"})
    assert status == 403 and "read-only" in body
    status, body = console.get("topics")
    assert "nope" not in body


def test_bad_input_gets_a_clear_answer(console) -> None:
    status, body = console.get("topics/no-such-topic")
    assert status == 404 and "topic 'no-such-topic' does not exist" in html.unescape(body)
    # A refused create answers with the form again, holding what was typed, and why.
    status, _, body = console.post("topics", {"name": "bad name!", "partitions": "1", "replication_factor": "1",
                                              "configs": "retention.ms=1000"})
    assert status == 400 and 'Topic name "bad name!" is illegal' in html.unescape(body)
    assert 'value="bad name!"' in body and 'value="1"' in body and ">retention.ms=1000</textarea>" in body
    status, _, body = console.post("topics", {"name": "ok", "partitions": "x"})
    assert status == 400 and "partitions must be a whole number" in body and 'value="ok"' in body
    console.post("topics", {"name": "browse", "partitions": "1"})
    status, body = console.get("topics/browse/messages?partition=7")
    assert status == 404 and "has no partition 7" in body
    status, body = console.get("topics/browse/messages?offset=abc")
    assert status == 400 and "offset must be a whole number" in body
    status, location, _ = console.post("topics/browse/messages", {"value": "v", "headers": "no separator"})
    assert status == 303 and "a+header+is" in location


def test_api_throughput_counts_offsets(kfk_broker, console) -> None:
    import json

    from confluent_kafka import Producer

    console.post("topics", {"name": "counted", "partitions": "2"})
    producer = Producer({"bootstrap.servers": kfk_broker})
    for index in range(7):
        producer.produce("counted", value=b"x", partition=index % 2)
    assert producer.flush(30) == 0
    status, body = console.get("api/throughput")
    sample = json.loads(body)
    assert status == 200 and sample["per_topic"]["counted"] == 7 and sample["total_offsets"] >= 7
    status, body = console.get("api/throughput?topic=counted")  # the topic page's chart
    assert status == 200 and json.loads(body)["per_topic"] == {"counted": 7}
    status, body = console.get("api/throughput?topic=deleted-meanwhile")  # its page open, the topic gone
    assert status == 200 and json.loads(body)["notes"] == ["topic deleted-meanwhile does not exist"]


def test_console_starts_with_the_cluster_down_and_shows_it(kfk_broker_process, console_factory) -> None:
    address = kfk_broker_process.bootstrap_servers
    assert kfk_broker_process.stop() == 0
    console = console_factory(address)
    assert "does not answer" in console.stderr_path.read_text()
    session = ConsoleSession(console.url)
    status, body = session.get("")
    assert status == 503 and 'id="cluster-state">down<' in body
    assert f"the cluster at {address} does not answer" in html.unescape(body)
    status, body = session.get("api/throughput")
    assert status == 503 and "error" in body

    kfk_broker_process.start()  # the same port: the console recovers without a restart
    wait_until(lambda: session.get("")[0] == 200, timeout=30, what="the overview with the cluster back")
    status, body = session.get("")
    assert 'id="broker-count">1<' in body and "cluster-state" not in body


def test_a_console_on_loopback_answers_only_to_loopback_names(console) -> None:
    port = urllib.parse.urlsplit(console.url).port
    rebound = urllib.request.Request(console.url, headers={"Host": f"rebound.example:{port}"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(rebound, timeout=30)
    assert refused.value.code == 400
    local = urllib.request.Request(console.url + "topics", headers={"Host": f"localhost:{port}"})
    with urllib.request.urlopen(local, timeout=30) as response:
        assert response.status == 200
