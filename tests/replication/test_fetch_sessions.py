"""Incremental fetch sessions (KIP-227) through the Fetch handler: a session opened by a full fetch, incremental
fetches answering only partitions with news, forgetting partitions, the session errors, topic ids (v13+), the
rotation of partitions that returned data, and closing a session with the final epoch."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kfk.common.clock import ManualClock
from kfk.common.structs import TopicPartition
from kfk.errors import ErrorCode
from kfk.protocol.messages.fetch import FetchRequest
from kfk.server.dispatch import Dispatcher
from kfk.server.fetch_session import FetchSessionCache
from kfk.server.handlers.fetch import FetchHandler
from kfk.storage.fetch_data_info import FileRegion
from kfk.protocol.headers import decode_response
from tests.replication.conftest import Broker, topic_records
from tests.replication.test_handlers import request_frame
from tests.storage.conftest import make_batch

Fetch = FetchRequest.FetchTopic
Part = FetchRequest.FetchPartition


class Fetcher:
    """One fetcher speaking to the handler through a dispatcher that lives as long as the test (so does its cache)."""

    def __init__(self, broker: Broker, slots: int = 10) -> None:
        self.broker = broker
        self.clock = ManualClock()
        self.cache = FetchSessionCache(slots, self.clock)
        self.dispatcher = Dispatcher()
        FetchHandler(broker.replica_manager, self.cache, broker.config.fetch_max_bytes).register(self.dispatcher)

    def fetch(self, version: int = 12, **fields):
        fields.setdefault("max_wait_ms", 0)
        fields.setdefault("max_bytes", 1 << 20)
        frame = request_frame(FetchRequest(**fields), version)
        chunks = asyncio.run(self.dispatcher.dispatch(frame, "127.0.0.1", 1, "PLAINTEXT"))
        data = b"".join(chunk.read_bytes() if isinstance(chunk, FileRegion) else bytes(chunk) for chunk in chunks)
        return decode_response(data[4:], 1, version)[1]


def answered(response) -> dict[tuple[str, int], tuple[int, int, int]]:
    """(topic, partition) -> (error, high watermark, record bytes) of every partition in the response."""
    return {(topic.topic, data.partition_index): (data.error_code, data.high_watermark, len(data.records))
            for topic in response.responses for data in topic.partitions}


def append(broker: Broker, topic: str, partition: int, count: int = 1) -> None:
    asyncio.run(broker.replica_manager.append_records(
        1000, 1, {TopicPartition(topic, partition): make_batch(0, [b"v"] * count)}))  # the leader assigns offsets


def parts(*indexes_and_offsets: tuple[int, int]) -> list:
    return [Part(partition=index, fetch_offset=offset, partition_max_bytes=1 << 16)
            for index, offset in indexes_and_offsets]


@pytest.fixture
def fetcher(broker: Broker) -> Fetcher:
    broker.commit(topic_records("a", 3) + topic_records("b", 1))
    for index in range(3):
        append(broker, "a", index, 2)
    return Fetcher(broker)


def test_a_session_answers_only_partitions_with_news(broker: Broker, fetcher: Fetcher) -> None:
    full = fetcher.fetch(session_id=0, session_epoch=0,
                         topics=[Fetch(topic="a", partitions=parts((0, 0), (1, 0), (2, 2))), Fetch(topic="b", partitions=parts((0, 0)))])
    assert full.error_code == ErrorCode.NONE and full.session_id != 0
    assert answered(full).keys() == {("a", 0), ("a", 1), ("a", 2), ("b", 0)}
    session_id = full.session_id
    # The fetcher read a-0 and a-1 to offset 2: it names only those (new positions); a-2 and b-0 have nothing new.
    quiet = fetcher.fetch(session_id=session_id, session_epoch=1,
                          topics=[Fetch(topic="a", partitions=parts((0, 2), (1, 2)))])
    assert (quiet.error_code, quiet.session_id, quiet.responses) == (ErrorCode.NONE, session_id, [])
    append(broker, "a", 2, 3)
    append(broker, "b", 0, 1)
    news = fetcher.fetch(session_id=session_id, session_epoch=2)
    found = answered(news)
    assert found.keys() == {("a", 2), ("b", 0)}
    assert found[("a", 2)][:2] == (ErrorCode.NONE, 5) and found[("a", 2)][2] > 0
    assert found[("b", 0)][:2] == (ErrorCode.NONE, 1) and found[("b", 0)][2] > 0
    # The session still fetches a-2 from offset 2 until told otherwise: the same records come again.
    again = fetcher.fetch(session_id=session_id, session_epoch=3,
                          topics=[Fetch(topic="b", partitions=parts((0, 1)))])
    assert answered(again).keys() == {("a", 2)}


def test_forgotten_partitions_leave_the_session(broker: Broker, fetcher: Fetcher) -> None:
    full = fetcher.fetch(session_id=0, session_epoch=0, topics=[Fetch(topic="a", partitions=parts((0, 2), (1, 2)))])
    forget = fetcher.fetch(session_id=full.session_id, session_epoch=1,
                           forgotten_topics_data=[FetchRequest.ForgottenTopic(topic="a", partitions=[1])])
    assert forget.responses == []
    append(broker, "a", 1)
    append(broker, "a", 0)
    assert answered(fetcher.fetch(session_id=full.session_id, session_epoch=2)).keys() == {("a", 0)}
    assert len(fetcher.cache.get(full.session_id).partitions) == 1


def test_session_errors(fetcher: Fetcher) -> None:
    full = fetcher.fetch(session_id=0, session_epoch=0, topics=[Fetch(topic="a", partitions=parts((0, 0)))])
    wrong_epoch = fetcher.fetch(session_id=full.session_id, session_epoch=5)
    assert (wrong_epoch.error_code, wrong_epoch.session_id, wrong_epoch.responses) == (
        ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])
    assert fetcher.fetch(session_id=full.session_id + 1, session_epoch=1).error_code in (
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,)
    # A session opened with topic names cannot be continued with topic ids (Fetch v13+).
    assert fetcher.fetch(version=13, session_id=full.session_id, session_epoch=1).error_code == \
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    # The same epoch twice: the second is refused (the epoch moved on with the first).
    assert fetcher.fetch(session_id=full.session_id, session_epoch=1).error_code == ErrorCode.NONE
    assert fetcher.fetch(session_id=full.session_id, session_epoch=1).error_code == \
        ErrorCode.INVALID_FETCH_SESSION_EPOCH
    # The final epoch closes the session and is answered as a full, sessionless fetch.
    final = fetcher.fetch(session_id=full.session_id, session_epoch=-1,
                          topics=[Fetch(topic="a", partitions=parts((0, 0)))])
    assert final.session_id == 0 and answered(final).keys() == {("a", 0)}
    assert fetcher.fetch(session_id=full.session_id, session_epoch=2).error_code == \
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND


def test_a_topic_id_session(broker: Broker) -> None:
    topic_id = uuid.uuid4()
    broker.commit(topic_records("ids", 2, topic_id=topic_id))
    append(broker, "ids", 0)
    fetcher = Fetcher(broker)
    full = fetcher.fetch(version=17, session_id=0, session_epoch=0,
                         topics=[Fetch(topic_id=topic_id, partitions=parts((0, 0), (1, 0)))])
    assert full.session_id != 0
    assert {(topic.topic_id, data.partition_index) for topic in full.responses for data in topic.partitions} == {
        (topic_id, 0), (topic_id, 1)}
    append(broker, "ids", 1)
    news = fetcher.fetch(version=17, session_id=full.session_id, session_epoch=1,
                         topics=[Fetch(topic_id=topic_id, partitions=parts((0, 1)))],
                         forgotten_topics_data=[])
    assert [(topic.topic_id, [data.partition_index for data in topic.partitions]) for topic in news.responses] == [
        (topic_id, [1])]
    # A topic id the broker does not know is answered UNKNOWN_TOPIC_ID, in the session like any partition.
    unknown = uuid.uuid4()
    error = fetcher.fetch(version=17, session_id=full.session_id, session_epoch=2,
                          topics=[Fetch(topic_id=topic_id, partitions=parts((1, 1))),
                                  Fetch(topic_id=unknown, partitions=parts((0, 0)))])
    assert [(topic.topic_id, topic.partitions[0].error_code) for topic in error.responses] == [
        (unknown, ErrorCode.UNKNOWN_TOPIC_ID)]


def test_partitions_that_returned_records_go_to_the_back(broker: Broker, fetcher: Fetcher) -> None:
    """With a response limit that one partition's data fills, the others are not starved: each fetch serves the
    partition that waited longest."""
    full = fetcher.fetch(session_id=0, session_epoch=0, max_bytes=1,
                         topics=[Fetch(topic="a", partitions=parts((0, 0), (1, 0), (2, 0)))])
    with_records = [key for key, (_, _, size) in answered(full).items() if size]
    assert with_records == [("a", 0)]  # the first batch always comes back, then the limit is reached
    order = [key[1] for key in fetcher.cache.get(full.session_id).partitions]
    assert order == [1, 2, 0]
    second = fetcher.fetch(session_id=full.session_id, session_epoch=1, max_bytes=1,
                           topics=[Fetch(topic="a", partitions=parts((0, 2)))])
    assert [key for key, (_, _, size) in answered(second).items() if size] == [("a", 1)]


def test_no_slots_means_sessionless_fetches(broker: Broker) -> None:
    broker.commit(topic_records("a", 1))
    fetcher = Fetcher(broker, slots=0)
    full = fetcher.fetch(session_id=0, session_epoch=0, topics=[Fetch(topic="a", partitions=parts((0, 0)))])
    assert (full.error_code, full.session_id) == (ErrorCode.NONE, 0)
    assert answered(full).keys() == {("a", 0)}
