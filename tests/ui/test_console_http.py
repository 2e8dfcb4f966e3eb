"""The web console over plain HTTP against a real kfk broker: read-only mode, and bad input answered with a page
that says what is wrong (never a server error)."""

from __future__ import annotations

import html
import urllib.error
import urllib.parse
import urllib.request

import pytest


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _post(url: str, fields: dict[str, str]) -> tuple[int, str, str]:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(url, data=urllib.parse.urlencode(fields).encode(), timeout=30) as response:
            return response.status, response.headers.get("location", ""), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("location", ""), error.read().decode()


@pytest.fixture
def console(kfk_broker, console_factory):
    return console_factory(kfk_broker)


def test_read_only_console_refuses_changes_and_hides_forms(kfk_broker, console_factory) -> None:
    console = console_factory(kfk_broker, "--read-only")
    status, body = _get(console.url + "topics")
    assert status == 200 and "read-only" in body and 'id="create-topic"' not in body
    status, _, body = _post(console.url + "topics", {"name": "nope"})
    assert status == 403 and "read-only" in body
    status, body = _get(console.url + "topics")
    assert "nope" not in body


def test_bad_input_gets_a_clear_answer(console) -> None:
    status, body = _get(console.url + "topics/no-such-topic")
    assert status == 404 and "topic 'no-such-topic' does not exist" in html.unescape(body)
    status, location, _ = _post(console.url + "topics", {"name": "bad name!", "partitions": "1"})
    assert status == 303 and "error=" in location and 'Topic name "bad name!" is illegal' in urllib.parse.unquote_plus(location)
    status, location, _ = _post(console.url + "topics", {"name": "ok", "partitions": "x"})
    assert status == 303 and "partitions+must+be+a+whole+number" in location
    _post(console.url + "topics", {"name": "browse", "partitions": "1"})
    status, body = _get(console.url + "topics/browse/messages?partition=7")
    assert status == 404 and "has no partition 7" in body
    status, body = _get(console.url + "topics/browse/messages?offset=abc")
    assert status == 400 and "offset must be a whole number" in body
    status, location, _ = _post(console.url + "topics/browse/messages", {"value": "v", "headers": "no separator"})
    assert status == 303 and "a+header+is" in location


def test_api_throughput_counts_offsets(kfk_broker, console) -> None:
    import json

    from confluent_kafka import Producer

    _post(console.url + "topics", {"name": "counted", "partitions": "2"})
    producer = Producer({"bootstrap.servers": kfk_broker})
    for index in range(7):
        producer.produce("counted", value=b"x", partition=index % 2)
    assert producer.flush(30) == 0
    status, body = _get(console.url + "api/throughput")
    sample = json.loads(body)
    assert status == 200 and sample["per_topic"]["counted"] == 7 and sample["total_offsets"] >= 7
