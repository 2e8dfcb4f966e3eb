"""The "kfk" data source on a real SparkSession: Spark's Kafka-source options, batch and streaming."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from kfk.client import Admin, TopicPartition  # noqa: E402
from tests.spark.conftest import create_topic, produce_json  # noqa: E402

pytestmark = pytest.mark.spark


def read(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("kfk").option("kafka.bootstrap.servers", bootstrap)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def positions(frame: Any) -> list[tuple[str, int, int]]:
    return sorted((row["topic"], row["partition"], row["offset"])
                  for row in frame.select("topic", "partition", "offset").collect())


def test_batch_options(spark: Any, kfk_broker: str) -> None:
    create_topic(kfk_broker, "shop-a", 3)
    create_topic(kfk_broker, "shop-b", 1)
    produced = produce_json(kfk_broker, "shop-a", 0, 300, codecs=("lz4",))
    produce_json(kfk_broker, "shop-b", 0, 10, codecs=("zstd",))
    ends = {p: max(r.offset for r in produced if r.partition == p) + 1 for p in range(3)}

    frame = read(spark, kfk_broker, subscribe="shop-a", minPartitions="7")
    assert frame.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert frame.rdd.getNumPartitions() >= 6 and frame.count() == 300

    starting = json.dumps({"shop-a": {"0": 5, "1": -2, "2": ends[2] - 1}})
    ending = json.dumps({"shop-a": {"0": 15, "1": 3, "2": -1}})
    rows = positions(read(spark, kfk_broker, subscribe="shop-a", startingOffsets=starting, endingOffsets=ending))
    assert rows == ([("shop-a", 0, offset) for offset in range(5, 15)] + [("shop-a", 1, offset) for offset in range(3)]
                    + [("shop-a", 2, ends[2] - 1)])

    assigned = read(spark, kfk_broker, assign=json.dumps({"shop-a": [1], "shop-b": [0]}), includeHeaders="true")
    assert {(row[0], row[1]) for row in assigned.select("topic", "partition").distinct().collect()} == {
        ("shop-a", 1), ("shop-b", 0)}
    assert assigned.filter("topic = 'shop-b'").first()["headers"][0].asDict() == {"key": "source", "value": b"test"}
    assert read(spark, kfk_broker, subscribePattern="shop-.*").count() == 310
    assert read(spark, kfk_broker, subscribe="shop-b", **{"kafka.isolation.level": "read_committed"}).count() == 10

    later = read(spark, kfk_broker, subscribe="shop-b", startingTimestamp=str(2**62),
                 startingOffsetsByTimestampStrategy="latest")
    assert later.count() == 0
    with pytest.raises(Exception, match="has a timestamp at or after"):
        read(spark, kfk_broker, subscribe="shop-b", startingTimestamp=str(2**62)).count()


def test_data_loss_fails_or_is_skipped(spark: Any, kfk_broker: str) -> None:
    create_topic(kfk_broker, "trimmed", 1)
    produce_json(kfk_broker, "trimmed", 0, 100, codecs=("zstd",))
    with Admin({"bootstrap.servers": kfk_broker}) as admin:
        assert admin.delete_records({TopicPartition("trimmed", 0): 40})[TopicPartition("trimmed", 0)] == 40
    from_zero = json.dumps({"trimmed": {"0": 0}})
    with pytest.raises(Exception, match="no longer available"):
        read(spark, kfk_broker, subscribe="trimmed", startingOffsets=from_zero).count()
    rows = positions(read(spark, kfk_broker, subscribe="trimmed", startingOffsets=from_zero, failOnDataLoss="false"))
    assert rows == [("trimmed", 0, offset) for offset in range(40, 100)]


def test_streaming_rate_limit_checkpoint_offsets_and_new_partitions(spark: Any, kfk_broker: str,
                                                                    tmp_path: Path) -> None:
    create_topic(kfk_broker, "metrics", 2)
    produce_json(kfk_broker, "metrics", 0, 600, codecs=("lz4",))
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run() -> None:
        frame = (spark.readStream.format("kfk").option("kafka.bootstrap.servers", kfk_broker)
                 .option("subscribe", "metrics").option("startingOffsets", "earliest")
                 .option("maxOffsetsPerTrigger", "250").load())
        query = (frame.writeStream.format("parquet").option("path", str(output))
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        query.awaitTermination()

    run()
    batches = sorted(int(path.name) for path in (checkpoint / "offsets").iterdir() if path.name.isdigit())
    assert len(batches) >= 3  # 600 offsets, at most 250 per micro-batch
    last = json.loads((checkpoint / "offsets" / str(batches[-1])).read_text().splitlines()[-1])
    with Admin({"bootstrap.servers": kfk_broker}) as admin:
        ends = admin.end_offsets([TopicPartition("metrics", 0), TopicPartition("metrics", 1)])
        assert last == {"metrics": {str(tp.partition): offset for tp, offset in ends.items()}}
        assert admin.create_partitions({"metrics": 3})["metrics"] is None
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": kfk_broker, "topic.metadata.refresh.interval.ms": 100})
    for number in range(20):
        producer.produce("metrics", b"late", key=str(number).encode(), partition=2)
    assert producer.flush(30) == 0
    run()
    rows = positions(spark.read.parquet(str(output)))
    assert len(rows) == len(set(rows)) == 620
    assert [offset for _, partition, offset in rows if partition == 2] == list(range(20))
