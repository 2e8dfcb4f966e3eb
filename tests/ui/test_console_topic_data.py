"""The message browser and a topic's data against one real kfk broker (shared by the module), with records from
confluent-kafka: a search by header and by a JSON field finds exactly the matching records; a time range reads only
the records inside it (ListOffsets by timestamp); a scan limit stops the search and says where; in headless Chromium
the live tail shows a record produced after the page opened (and not one its filter rejects); and the console
holds at most four tails at once, freeing a slot when a page's connection closes; the log directories' sizes are
kafka-log-dirs.sh's, and the topic page's records/s chart counts new records."""

from __future__ import annotations

import html
import http.client
import json
import re
import time
import urllib.parse

import pytest
from confluent_kafka import Producer

from kfk.client import Admin, NewTopic
from kfk.testing.broker import start_broker
from kfk.testing.apache_kafka import run_kafka_tool
from tests.ui.conftest import ConsoleSession, screenshot

pytestmark = pytest.mark.integration

TOPIC = "orders"
BASE_MS = 1_700_000_000_000
COUNT = 40


def _value(index: int) -> bytes:
    if index == 5:
        return b"not json at all"
    return json.dumps({"n": index, "user": {"id": 42 if index in (7, 23) else index}}).encode()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    """One broker for the module, with 40 records in two partitions: record i in partition i % 2, at BASE_MS + i s,
    header source=mobile when i % 10 == 3 (else web), user.id 42 for i in (7, 23)."""
    process = start_broker(tmp_path_factory.mktemp("ui-messages-broker"), {})
    try:
        with Admin({"bootstrap.servers": process.bootstrap_servers}) as admin:
            assert admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC] is None
        producer = Producer({"bootstrap.servers": process.bootstrap_servers})
        for index in range(COUNT):
            producer.produce(TOPIC, _value(index), key=b"key-%d" % index, partition=index % 2,
                             timestamp=BASE_MS + index * 1000,
                             headers=[("source", b"mobile" if index % 10 == 3 else b"web")])
        assert producer.flush(30) == 0
        del producer
        yield process
    finally:
        process.stop()


def _search(console: ConsoleSession, **params: str) -> tuple[str, set[int]]:
    status, body = console.get(f"topics/{TOPIC}/messages?" + urllib.parse.urlencode(dict(params, search="1")))
    assert status == 200, body
    text = html.unescape(body)
    table = text[text.index('id="records"'):]
    found = {int(n) for n in re.findall(r'"n": (\d+)', table)} | (
        {5} if "not json at all" in table else set())
    return text, found


def test_search_by_header_json_field_time_range_and_scan_limit(broker, console_factory) -> None:
    console = ConsoleSession(console_factory(broker.bootstrap_servers).url)

    text, found = _search(console, partition="all", header="source: mobile")
    assert found == {3, 13, 23, 33}
    assert re.search(r"4 found in\s*<span id=\"scanned\">40</span> records scanned; stopped at the end of the range",
                     text)

    text, found = _search(console, partition="all", field="$.user.id == 42")
    assert found == {7, 23}
    _, found = _search(console, partition="all", field="$.user.id >= 38")
    assert found == {7, 23, 38, 39}  # 42 is more than 38 too
    _, found = _search(console, partition="1", value="not json")
    assert found == {5}
    _, found = _search(console, partition="1", value="not json", key="key-7")
    assert found == set()  # every criterion must hold

    # A time range [BASE+10 s, BASE+20 s) is found by ListOffsets: exactly its ten records are read.
    text, found = _search(console, partition="all", from_time=str(BASE_MS + 10_000), to_time=str(BASE_MS + 20_000))
    assert found == set(range(10, 20))
    assert '<span id="scanned">10</span>' in text

    # A scan limit stops the search, says where, and links to go on from there.
    text, found = _search(console, partition="0", max_scanned="6")
    assert found == {0, 2, 4, 6, 8, 10}
    assert "stopped at the scan limit of 6 records" in text and "partition 0 at offset 6 of 0–20" in text
    more = re.search(r'id="search-continue" href="\?([^"]+)"', text)
    assert more is not None
    status, body = console.get(f"topics/{TOPIC}/messages?" + more.group(1))
    assert status == 200 and "partition 0 at offset 12 of 6–20" in html.unescape(body)

    status, body = console.get(f"topics/{TOPIC}/messages?search=1&field=user.id")
    assert status == 400 and "a JSON field starts with $" in html.unescape(body)


def _open_tail(url: str) -> http.client.HTTPResponse:
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    connection.request("GET", f"/api/topics/{TOPIC}/tail?partition=0")
    return connection.getresponse()


def test_live_tail_shows_new_records_and_is_bounded(broker, console_factory, browser_page) -> None:
    console = console_factory(broker.bootstrap_servers)
    page = browser_page
    page.goto(console.url + f"topics/{TOPIC}/messages")
    page.fill("#search input[name=header]", "source: mobile")
    page.select_option("#search select[name=partition]", "0")
    page.click("#tail-start")
    page.wait_for_function("document.getElementById('tail-status').textContent.includes('waiting for new records')")

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(TOPIC, b'{"tail": "rejected"}', partition=0, headers=[("source", b"web")])
    producer.produce(TOPIC, b'{"tail": "shown"}', partition=0, headers=[("source", b"mobile")])
    assert producer.flush(30) == 0
    page.wait_for_selector("#tail-records tbody tr")
    rows = page.locator("#tail-records tbody tr")
    assert rows.count() == 1 and '"shown"' in rows.first.inner_text()
    assert "1 record(s) received" in page.locator("#tail-status").inner_text()
    screenshot(page, "messages-tail")
    assert page.kfk_errors == []
    page.click("#tail-stop")

    # Four tails at once, a fifth refused; one page gone frees its slot.
    opened = []
    deadline = time.monotonic() + 30
    while len(opened) < 4 and time.monotonic() < deadline:  # the browser's stopped tail may take a moment to go
        response = _open_tail(console.url)
        if response.status == 200:
            opened.append(response)
        else:
            response.close()
    assert len(opened) == 4
    refused = _open_tail(console.url)
    assert refused.status == 429 and "4 live tails are open already" in refused.read().decode()
    assert opened[0].readline().startswith(b"event: ready")
    opened.pop().close()
    while True:
        again = _open_tail(console.url)
        if again.status == 200 or time.monotonic() > deadline:
            break
        again.close()
    assert again.status == 200
    for response in [*opened, again]:
        response.close()


def test_log_dir_sizes_and_topic_throughput(broker, console_factory, browser_page) -> None:
    """The broker page's log directories and the topic page's replica sizes are kafka-log-dirs.sh's figures (Apache
    Kafka's own tool, run against the same broker); the topic page's records/s chart counts new records."""
    console = console_factory(broker.bootstrap_servers)
    session = ConsoleSession(console.url)
    with Admin({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        broker_id = admin.describe_cluster().brokers[0].node_id
    described = run_kafka_tool("log-dirs", ["--describe", "--bootstrap-server", broker.bootstrap_servers,
                                            "--broker-list", str(broker_id)], timeout=120)
    report = json.loads(next(line for line in described.stdout.splitlines() if line.startswith("{")))
    (logged,) = report["brokers"]
    expected = {entry["partition"]: entry["size"] for log_dir in logged["logDirs"] for entry in log_dir["partitions"]}
    assert expected[f"{TOPIC}-0"] > 0 and expected[f"{TOPIC}-1"] > 0

    status, body = session.get(f"brokers/{broker_id}")
    assert status == 200
    dirs = html.unescape(body[body.index('id="log-dirs"'):body.index('id="broker-configs"')])
    assert [log_dir["logDir"] for log_dir in logged["logDirs"]] == re.findall(r'<td class="mono">([^<]+?)</td>', dirs)
    shown = int(re.search(rf'data-topic="{TOPIC}" data-bytes="(\d+)"', dirs).group(1))
    assert shown == expected[f"{TOPIC}-0"] + expected[f"{TOPIC}-1"]
    assert int(re.search(r'data-bytes="(\d+)"', dirs).group(1)) == sum(expected.values())

    status, body = session.get(f"topics/{TOPIC}")
    assert status == 200
    sizes = [int(size) for size in re.findall(rf'data-broker="{broker_id}" data-bytes="(\d+)"', body)]
    assert sizes == [expected[f"{TOPIC}-0"], expected[f"{TOPIC}-1"]]

    page = browser_page
    page.goto(console.url + f"topics/{TOPIC}")
    page.wait_for_selector("#throughput-chart polyline", state="attached")  # two samples taken: a rate is drawn
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    deadline = time.monotonic() + 30
    while page.locator("#throughput").inner_text() in ("–", "0") and time.monotonic() < deadline:
        for _ in range(50):
            producer.produce(TOPIC, b"burst", partition=1)
        producer.flush(10)
        page.wait_for_timeout(300)
    assert int(page.locator("#throughput").inner_text().replace(",", "")) > 0
    assert page.locator("#throughput-note").inner_text() == ""
    screenshot(page, "topic-size-throughput")
    assert page.kfk_errors == []
