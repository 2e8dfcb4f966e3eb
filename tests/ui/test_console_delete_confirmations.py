"""The console's deletes ask first, in headless Chromium: deleting a group's committed offsets of a topic, the group,
and a topic each opens the browser's confirm dialog naming what goes; cancelling it sends nothing (no POST leaves
the page) and a confluent-kafka (librdkafka) admin client still finds everything; confirming deletes exactly that."""

from __future__ import annotations

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.helpers import wait_until

GROUP = "doomed-readers"


def _committed_topics(admin: AdminClient) -> set[str]:
    request = ConsumerGroupTopicPartitions(GROUP)
    offsets = admin.list_consumer_group_offsets([request])[GROUP].result(30)
    return {tp.topic for tp in offsets.topic_partitions if tp.offset >= 0}


def _groups(admin: AdminClient) -> set[str]:
    return {listing.group_id for listing in admin.list_consumer_groups().result(30).valid}


def _prepare(bootstrap: str, admin: AdminClient) -> None:
    """Two topics with records, and an empty group that committed offsets on both."""
    for future in admin.create_topics([NewTopic(name, 1, 1) for name in ("orders", "audit")]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for name in ("orders", "audit"):
        producer.produce(name, value=b"a record of " + name.encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe(["orders", "audit"])
        read: set[str] = set()

        def read_both() -> bool:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                read.add(message.topic())
            return read == {"orders", "audit"}

        wait_until(read_both, timeout=30, what="a record of each topic read")
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()  # the group is left empty: Kafka deletes only groups without members
    assert _committed_topics(admin) == {"orders", "audit"}


def test_deletes_need_confirming_and_cancel_deletes_nothing(kfk_broker, console_factory, browser_page) -> None:
    admin = AdminClient({"bootstrap.servers": kfk_broker})
    _prepare(kfk_broker, admin)
    console = console_factory(kfk_broker)
    page = browser_page
    posts: list[str] = []
    page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)
    dialogs: list[str] = []

    def answer(accept: bool) -> None:
        page.once("dialog", lambda dialog: (dialogs.append(dialog.message),
                                            dialog.accept() if accept else dialog.dismiss()))

    # Offsets of one topic: cancelled, then confirmed.
    page.goto(console.url + f"groups/{GROUP}")
    page.click("summary:has-text('Delete committed offsets or the group')")
    page.select_option("#delete-offsets select[name=topic]", "audit")
    answer(accept=False)
    page.click("#delete-offsets button[type=submit]")
    assert dialogs == ["Delete the group's committed offsets of this topic?"]
    assert posts == [] and page.url == console.url + f"groups/{GROUP}"
    assert _committed_topics(admin) == {"orders", "audit"}
    answer(accept=True)
    page.click("#delete-offsets button[type=submit]")
    page.wait_for_url(lambda url: "notice=" in url)
    assert "deleted the committed offsets of 1 partition(s) of audit" in page.locator(".notice").inner_text()
    assert _committed_topics(admin) == {"orders"}

    # The group: cancelled, then confirmed.
    posts.clear()
    page.click("summary:has-text('Delete committed offsets or the group')")
    answer(accept=False)
    page.click("#delete-group")
    assert dialogs[-1] == f"Delete group {GROUP} and all its committed offsets?"
    assert posts == [] and GROUP in _groups(admin) and _committed_topics(admin) == {"orders"}
    answer(accept=True)
    page.click("#delete-group")
    page.wait_for_url(lambda url: "/groups?notice=" in url)
    assert f"deleted group {GROUP}" in page.locator(".notice").inner_text()
    assert GROUP not in _groups(admin)

    # A topic: cancelled, then confirmed.
    posts.clear()
    page.goto(console.url + "topics/audit")
    answer(accept=False)
    page.click("#delete-topic")
    assert dialogs[-1] == "Delete topic audit and all its records?"
    assert posts == [] and "audit" in admin.list_topics(timeout=30).topics
    answer(accept=True)
    page.click("#delete-topic")
    page.wait_for_url(lambda url: "/topics?notice=" in url)
    assert "deleted topic audit" in page.locator(".notice").inner_text()
    wait_until(lambda: "audit" not in admin.list_topics(timeout=30).topics, what="audit gone from the metadata")
    assert "orders" in admin.list_topics(timeout=30).topics
    assert len(dialogs) == 6 and page.kfk_errors == []
