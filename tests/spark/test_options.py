"""The data source's options and offset planning, without Spark: Spark's names, defaults and rules."""

from __future__ import annotations

import pytest

from kfk.common.structs import TopicPartition
from kfk.errors import InvalidConfigurationError
from kfk.spark.offsets import OffsetRange, rate_limit, split_ranges
from kfk.spark.options import EARLIEST, LATEST, SourceOptions

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a,b"}


def parse(streaming: bool = False, **extra: str) -> SourceOptions:
    return SourceOptions.parse({**BASE, **extra}, streaming=streaming)


def test_defaults_are_sparks() -> None:
    batch, stream = parse(), parse(streaming=True)
    assert (batch.starting.kind, batch.ending.kind, stream.starting.kind) == ("earliest", "latest", "latest")
    assert batch.fail_on_data_loss and not batch.include_headers and not batch.read_committed
    assert batch.topics.subscribe == ("a", "b") and batch.poll_timeout_ms == 120_000


def test_names_are_case_insensitive_and_kafka_options_reach_the_consumer() -> None:
    options = SourceOptions.parse({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "SubscribePattern": "t-.*",
                                   "kafka.isolation.level": "read_committed", "kafka.fetch.max.bytes": "1024",
                                   "kafka.group.id": "ignored", "includeheaders": "TRUE"}, streaming=False)
    assert options.bootstrap_servers == "h:1" and options.topics.pattern == "t-.*"
    assert options.read_committed and options.include_headers
    assert options.consumer_config == {"isolation.level": "read_committed", "fetch.max.bytes": "1024"}


def test_per_partition_json_with_sentinels() -> None:
    options = parse(startingOffsets='{"a":{"0":23,"1":-2}}', endingOffsets='{"a":{"0":-1,"1":50}}')
    assert options.starting.offsets == {TopicPartition("a", 0): 23, TopicPartition("a", 1): EARLIEST}
    assert options.ending.offsets == {TopicPartition("a", 0): LATEST, TopicPartition("a", 1): 50}


def test_timestamp_options_take_precedence_as_in_spark() -> None:
    options = parse(startingTimestamp="1000", startingOffsetsByTimestamp='{"a":{"0":5}}', startingOffsets="earliest")
    assert (options.starting.kind, options.starting.timestamp) == ("timestamp", 1000)
    options = parse(startingOffsetsByTimestamp='{"a":{"0":5}}', startingOffsets="earliest")
    assert options.starting.timestamps == {TopicPartition("a", 0): 5}


@pytest.mark.parametrize(("extra", "message"), [
    ({"subscribe": ""}, "exactly one of"),
    ({"assign": '{"a":[0]}'}, "exactly one of"),
    ({"startingOffsets": "latest"}, "can't be latest for batch"),
    ({"startingOffsets": '{"a":{"0":-1}}'}, "can't use -1"),
    ({"endingOffsets": "earliest"}, "can't be earliest"),
    ({"endingOffsets": '{"a":{"0":-2}}'}, "can't use -2"),
    ({"startingOffsets": '{"a":{"0":1}'}, "not valid JSON"),
    ({"startingOffsets": '{"a":{"x":1}}'}, "not a partition number"),
    ({"startingOffsets": '{"a":{"0":"1"}}'}, "must be an integer"),
    ({"startingOffsets": '["a"]'}, "JSON object"),
    ({"kafka.auto.offset.reset": "earliest"}, "startingOffsets instead"),
    ({"kafka.enable.auto.commit": "true"}, "not supported"),
    ({"minPartitions": "0"}, "positive integer"),
    ({"maxOffsetsPerTrigger": "many"}, "positive integer"),
    ({"failOnDataLoss": "maybe"}, "true or false"),
    ({"startingOffsetsByTimestampStrategy": "earliest"}, "error or latest"),
    ({"subscribePattern": "(", "subscribe": ""}, "not a valid regex"),
])
def test_bad_options_are_named(extra: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigurationError, match=message):
        parse(**extra)


def test_streaming_refuses_ending_offsets_and_needs_a_source() -> None:
    with pytest.raises(InvalidConfigurationError, match="not valid in streaming"):
        parse(streaming=True, endingOffsets="latest")
    with pytest.raises(InvalidConfigurationError, match="bootstrap.servers"):
        SourceOptions.parse({"subscribe": "a"}, streaming=False)


def test_min_partitions_splits_in_proportion_and_covers_every_offset() -> None:
    ranges = [OffsetRange("a", 0, 0, 1000), OffsetRange("a", 1, 500, 600), OffsetRange("a", 2, 7, 7)]
    assert split_ranges(ranges, None) == ranges[:2]
    assert split_ranges(ranges, 2) == ranges[:2]
    split = split_ranges(ranges, 11)
    assert [r for r in split if r.partition == 1] == [ranges[1]]
    parts = [r for r in split if r.partition == 0]
    assert len(parts) == 10 and parts[0].from_offset == 0 and parts[-1].until_offset == 1000
    assert all(low.until_offset == high.from_offset for low, high in zip(parts, parts[1:]))


def test_max_offsets_per_trigger_is_shared_by_backlog() -> None:
    a0, a1, a2 = (TopicPartition("a", n) for n in range(3))
    starts = {a0: 0, a1: 100, a2: 5}
    ends = {a0: 900, a1: 200, a2: 5}
    limited = rate_limit(starts, ends, 100)
    assert limited == {a0: 90, a1: 110, a2: 5}
    assert rate_limit(starts, ends, 10_000) == ends
    # A partition whose share is below one offset still moves.
    assert rate_limit({a0: 0, a1: 0}, {a0: 10_000, a1: 1}, 100)[a1] == 1
