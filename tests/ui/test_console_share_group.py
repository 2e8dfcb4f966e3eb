"""A share group (KIP-932) in the console and in `kfk cluster describe`, its members being confluent-kafka's ShareConsumer (librdkafka's): the groups
page lists it as a share group; its page names its members (who share the partitions) and, per partition, the
share-partition start offset, the log end offset and the lag DescribeShareGroupOffsets reports, as
kafka-share-groups --describe --offsets does; once the group is empty, an offset reset sets the start offsets
(AlterShareGroupOffsets, after the confirmation) and a delete forgets the topic's share state
(DeleteShareGroupOffsets). The consumer-group paths answered a share group with an error before, and `kfk cluster
describe` left share groups out."""

from __future__ import annotations

import html
import json
import re
import time

from confluent_kafka import ShareConsumer
from typer.testing import CliRunner

from kfk.cli import app

from kfk.client import Admin, NewTopic, Producer, TopicPartition
from kfk.errors import UnknownTopicOrPartitionError
from tests.cluster.helpers import wait_until
from tests.ui.conftest import ConsoleSession

TOPIC, GROUP = "queued", "queue-readers"


def lag_rows(body: str) -> list[list[str]]:
    """The lag table's rows, cell texts."""
    rows = body.split('<tbody id="lag-rows">', 1)[1].split("</tbody>", 1)[0]
    return [[html.unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row,
                                                                                      re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", rows, re.S)]


def share_offsets(bootstrap: str) -> dict[tuple[str, int], int]:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        return {(tp.topic, tp.partition): start for tp, (start, _, _) in admin.list_share_group_offsets(GROUP).items()}


def test_a_share_group_is_shown_reset_and_deleted(kfk_broker, console_factory) -> None:
    partitions = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
    with Admin({"bootstrap.servers": kfk_broker}) as admin:
        admin.create_topics([NewTopic(TOPIC, 2, 1)])
        deadline = time.monotonic() + 30
        # The group starts at offset 0, so nothing produced before the first fetch is skipped.
        while (errors := [error for error in admin.alter_share_group_offsets(
                GROUP, dict.fromkeys(partitions, 0)).values() if error is not None]):
            assert isinstance(errors[0], UnknownTopicOrPartitionError) and time.monotonic() < deadline, errors
            time.sleep(0.1)
    with Producer({"bootstrap.servers": kfk_broker}) as producer:
        for index in range(10):
            producer.send(TOPIC, f"job {index}".encode(), partition=index % 2)
        producer.flush()

    members = [ShareConsumer({"bootstrap.servers": kfk_broker, "group.id": GROUP, "client.id": name})
               for name in ("worker-a", "worker-b")]
    received: list[tuple[int, int]] = []
    try:
        for member in members:
            member.subscribe([TOPIC])

        def poll_all() -> bool:
            for member in members:
                for message in member.poll(0.2) or []:
                    if message.error() is None:
                        received.append((message.partition(), message.offset()))
            return len(received) >= 10

        wait_until(poll_all, timeout=60, what="the 10 records delivered")
        assert sorted(received) == sorted((index % 2, index // 2) for index in range(10))  # each once
        for member in members:
            member.commit_sync()  # implicit acknowledgement: the records of the last poll are accepted
        wait_until(lambda: share_offsets(kfk_broker) == {(TOPIC, 0): 5, (TOPIC, 1): 5}, timeout=30,
                   what="every record acknowledged")

        console = ConsoleSession(console_factory(kfk_broker).url)
        status, body = console.get("groups")
        assert status == 200
        row = body.split(f">{GROUP}</a>", 1)[1].split("</tr>", 1)[0]
        assert "<td>share</td>" in row  # the protocol type and the group type

        status, body = console.get(f"groups/{GROUP}")
        assert status == 200, body
        assert f"Share group {GROUP}" in body and "<th>Start offset</th>" in body
        assert "worker-a" in body and "worker-b" in body
        # Both members are assigned both partitions (the simple assignor shares every partition).
        owners = {row[1]: row[5] for row in lag_rows(body)}
        assert [row[:5] for row in lag_rows(body)] == [[TOPIC, "0", "5", "5", "0"], [TOPIC, "1", "5", "5", "0"]]
        assert all(set(owners[p].split(", ")) <= {"worker-a", "worker-b"} and owners[p] for p in owners), owners
        described = CliRunner().invoke(app, ["cluster", "describe", "--bootstrap-server", kfk_broker, "--json"])
        assert described.exit_code == 0, described.output
        assert json.loads(described.output)["share_groups"] == [
            {"group_id": GROUP, "state": "Stable", "partition_count": 2, "total_lag": 0, "assigned_partition_count": 2}]
        status, body = console.get(f"api/groups/{GROUP}/lag")
        lag = json.loads(body)
        assert status == 200 and lag["total_lag"] == 0
        assert [(row["partition"], row["committed_offset"]) for row in lag["partitions"]] == [(0, 5), (1, 5)]
    finally:
        for member in members:
            member.close()

    def empty() -> bool:
        return "<strong id=\"group-state\">Empty</strong>" in console.get(f"groups/{GROUP}")[1]

    wait_until(empty, timeout=60, what="the share group empty")
    status, _, body = console.post(f"groups/{GROUP}/reset", {"topic": TOPIC, "to": "earliest"})
    assert status == 200 and 'id="reset-confirm"' in body
    assert share_offsets(kfk_broker) == {(TOPIC, 0): 5, (TOPIC, 1): 5}  # the plan changes nothing
    status, location, _ = console.post(f"groups/{GROUP}/reset", {"topic": TOPIC, "to": "earliest", "confirm": "yes"})
    assert status == 303 and "notice=reset" in location, location
    assert share_offsets(kfk_broker) == {(TOPIC, 0): 0, (TOPIC, 1): 0}
    assert [row[:5] for row in lag_rows(console.get(f"groups/{GROUP}")[1])] == [
        [TOPIC, "0", "0", "5", "5"], [TOPIC, "1", "0", "5", "5"]]

    status, location, _ = console.post(f"groups/{GROUP}/delete-offsets", {"topic": TOPIC})
    assert status == 303 and "notice=" in location and "error=" not in location, location
    assert share_offsets(kfk_broker) == {}
