"""The web console in a real headless browser against a real 3-broker kfk cluster (ZooKeeper mode): the overview,
creating a topic, producing a message from the page and finding it in the message browser (and with an independent
client), a consumer group's lag falling live as it consumes, and a preferred-replica election moving leadership
back, and a reassignment generated, started and watched to its end. Screenshots of each step are saved as test artifacts; the pages must raise no JavaScript error."""

from __future__ import annotations

import json
import re

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition

from tests.cluster.helpers import create_topic, partitions, wait_until
from tests.ui.conftest import screenshot


def _consume(bootstrap: str, topic: str, group: str, count: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    messages = []
    try:
        deadline_polls = 200
        while len(messages) < count and deadline_polls:
            deadline_polls -= 1
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                messages.append(message)
        consumer.commit(offsets=[ConfluentTopicPartition(topic, messages[-1].partition(), messages[-1].offset() + 1)],
                        asynchronous=False)
    finally:
        consumer.close()
    return messages


def test_console_flow(kfk_cluster, console_factory, browser_page) -> None:
    bootstrap = kfk_cluster.bootstrap_servers
    console = console_factory(bootstrap)
    page = browser_page

    # Overview: three brokers, the controller, the statistics table.
    page.goto(console.url)
    assert page.locator("#broker-count").inner_text() == "3"
    assert page.locator("text=controller").first.is_visible()
    screenshot(page, "01-overview")

    # Create a topic from the topics page.
    page.goto(console.url + "topics")
    page.fill("#create-topic input[name=name]", "ui-orders")
    page.fill("#create-topic input[name=partitions]", "3")
    page.fill("#create-topic input[name=replication_factor]", "3")
    page.fill("#create-topic textarea[name=configs]", "retention.ms=3600000")
    page.click("#create-topic button[type=submit]")
    page.wait_for_url(re.compile(r"/topics/ui-orders\?"))
    assert "created topic ui-orders" in page.locator(".notice").inner_text()
    assert page.locator("#partitions tbody tr").count() == 3
    retention = page.locator("#configs tr", has_text="retention.ms").first.inner_text()
    assert "3600000" in retention and "DYNAMIC_TOPIC_CONFIG" in retention
    screenshot(page, "02-topic")

    # Produce a message from the page, then see it in the message browser.
    page.click("#browse-messages")
    page.fill("#produce input[name=partition]", "0")
    page.fill("#produce input[name=key]", "order-1")
    page.fill("#produce textarea[name=value]", '{"item": "book", "qty": 2}')
    page.fill("#produce textarea[name=headers]", "source: kfk-ui")
    page.click("#produce button[type=submit]")
    page.wait_for_url(re.compile(r"notice=produced"))
    assert "produced to partition 0 at offset 0" in page.locator(".notice").inner_text()
    row = page.locator("#records tbody tr").first
    assert row.locator("td").nth(0).inner_text() == "0"
    assert row.locator("td").nth(2).inner_text() == "order-1"
    assert json.loads(row.locator("td").nth(3).inner_text()) == {"item": "book", "qty": 2}
    assert row.locator("pre.json").count() == 1  # pretty-printed as JSON
    assert "source: kfk-ui" in row.locator("td").nth(4).inner_text()
    screenshot(page, "03-messages")
    # An independent client reads exactly what the page produced.
    [message] = _consume(bootstrap, "ui-orders", "ui-check", 1)
    assert (message.partition(), message.offset(), message.key(), message.value(), message.headers()) == (
        0, 0, b"order-1", b'{"item": "book", "qty": 2}', [("source", b"kfk-ui")])

    # A consumer group's lag, live: 20 more records, a group that read 5 of 21, then the rest.
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for index in range(20):
        producer.produce("ui-orders", value=f"order {index}".encode(), partition=0)
    assert producer.flush(30) == 0
    _consume(bootstrap, "ui-orders", "ui-readers", 5)
    page.goto(console.url + "groups")
    page.click("text=ui-readers")
    wait_until(lambda: page.locator("#total-lag").inner_text() == "16", timeout=15, what="lag 16 on the page")
    screenshot(page, "04-group-lag")
    _consume(bootstrap, "ui-orders", "ui-readers", 16)
    # No reload: the page's own refresh shows the lag drop to 0.
    wait_until(lambda: page.locator("#total-lag").inner_text() == "0", timeout=15, what="lag 0 on the page")
    lag_row = page.locator("#lag-rows tr").first.inner_text()
    assert lag_row.split("\t")[:5] == ["ui-orders", "0", "21", "21", "0"]
    screenshot(page, "05-group-lag-consumed")

    # Preferred replica election: broker 1 leads "elect" until it restarts; the page's button moves leadership back.
    create_topic(bootstrap, "elect", assignment=[[1, 2, 3]])
    wait_until(lambda: partitions(bootstrap, "elect")[0][2] == [1, 2, 3], what="elect fully replicated")
    assert kfk_cluster.stop(1) == 0
    kfk_cluster.start([1])
    others = kfk_cluster.bootstrap_servers
    wait_until(lambda: sorted(partitions(others, "elect")[0][2]) == [1, 2, 3], what="broker 1 back in the ISR")
    assert partitions(others, "elect")[0][0] == 2
    page.goto(console.url + "topics/elect")
    assert page.locator("#partitions td.preferred").inner_text() == "no (1)"
    page.click("#elect-topic")
    page.wait_for_url(re.compile(r"notice="))
    assert "preferred replica election: 1 partition(s) changed leader" in page.locator(".notice").inner_text()
    wait_until(lambda: partitions(others, "elect")[0][0] == 1, what="broker 1 leads again")
    page.goto(console.url + "topics/elect")
    assert page.locator("#partitions td.preferred").inner_text() == "yes"
    screenshot(page, "06-election")

    # Reassignment: generate a plan moving "moving" (on brokers 1, 2) onto brokers 2 and 3, start it, watch it end.
    create_topic(others, "moving", assignment=[[1, 2]])
    wait_until(lambda: sorted(partitions(others, "moving")[0][2]) == [1, 2], what="moving fully replicated")
    page.goto(console.url + "reassignments")
    page.check("#generate input[name=topics][value=moving]")
    page.uncheck("#generate input[name=brokers][value='1']")
    page.click("#generate button[type=submit]")
    plan = json.loads(page.locator("#execute textarea[name=plan]").input_value())
    [entry] = plan["partitions"]
    assert entry["topic"] == "moving" and sorted(entry["replicas"]) == [2, 3]
    assert json.loads(page.locator("#current-plan").inner_text())["partitions"][0]["replicas"] == [1, 2]
    screenshot(page, "07-reassignment-plan")
    page.click("#execute button[type=submit]")
    page.wait_for_url(re.compile(r"notice="))
    assert "reassignment of 1 partition(s) started" in page.locator(".notice").inner_text()
    wait_until(lambda: sorted(partitions(others, "moving")[0][1]) == [2, 3], timeout=30,
               what="moving's replicas are brokers 2 and 3")
    wait_until(lambda: page.locator("#in-progress-rows").inner_text().strip() == "No reassignment in progress.",
               timeout=15, what="the page's live list shows nothing in progress")
    screenshot(page, "08-reassignment-done")

    page.goto(console.url)
    page.wait_for_timeout(1500)  # let the throughput chart poll a few times
    screenshot(page, "09-overview-after")
    assert page.kfk_errors == []
