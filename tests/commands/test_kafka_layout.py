"""kfk/commands/kafka_layout.py against facts taken from Java 17 and Kafka 4.0.2's classes: String.hashCode, the
iteration order of a java.util.HashMap of TopicPartitions (one that grew past 16 buckets too), Java's ``%-Ns`` and
ToolsUtils.prettyPrintTable."""

from __future__ import annotations

from kfk.commands.kafka_layout import columns, hash_map_order, java_string_hash, partitions_in_kafka_order, \
    tools_table
from kfk.common.structs import TopicPartition


def test_string_hash_codes_are_javas() -> None:
    # "hello".hashCode(), a surrogate pair (two UTF-16 units) and a hash past 2^31 (negative in Java).
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("\U0001F600") == 1772899
    assert java_string_hash("a-much-longer-topic-name") == 260706745
    assert java_string_hash("polygenelubricants") == 2**32 - 2**31  # Integer.MIN_VALUE


def test_partitions_come_in_the_order_of_javas_hash_map() -> None:
    # A HashMap<TopicPartition, ?> filled with these 16 keys (in this order) iterates them so: it resized to 32
    # buckets on the 13th.
    keys = [TopicPartition("orders", p) for p in range(14)] + [TopicPartition("payéments", 0),
                                                                TopicPartition("\U0001F600", 3)]
    assert [str(tp) for tp in partitions_in_kafka_order(keys)] == [
        "orders-7", "orders-8", "orders-9", "orders-10", "orders-11", "orders-12", "orders-13", "payéments-0",
        "orders-0", "orders-1", "\U0001F600-3", "orders-2", "orders-3", "orders-4", "orders-5", "orders-6"]
    # Equal hash codes ("Aa" and "BB") share a bucket: they keep the order they were put in.
    assert hash_map_order(["BB", "Aa"], java_string_hash) == ["BB", "Aa"]


def test_printf_columns_and_the_tools_table() -> None:
    assert columns(["GROUP", "a-longer-value", 7, "last"], [8, 5, 4, None]) == "GROUP    a-longer-value 7    last"
    assert tools_table(["Id", "State"], [["12345", "Ongoing"], ["1", "Empty"]]) == [
        "Id   \tState  \t", "12345\tOngoing\t", "1    \tEmpty  \t"]
