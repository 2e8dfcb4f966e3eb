"""Spark export benchmark: `kfk spark-export` to Parquet next to what kfk's client alone does with the same records.

    python bench/bench_spark.py [--records 1000000] [--record-size 1024] [--partitions 4] [--master local[2]]
                                [--repetitions 3]

One broker (a `kfk server start` subprocess) holds a fresh topic of --records records of --record-size random bytes
(keys of about 10 bytes, no compression), written by confluent-kafka. Then, one after the other:

- consumer -> /dev/null: one kfk Consumer assigned every partition, polling until it has seen every record (the
  records are decoded into ConsumerRecords and dropped);
- consumer -> pyarrow Parquet: the same reads turned into Arrow batches by kfk.spark's own reader (the code a Spark
  task runs) and written with pyarrow.parquet, one file per partition, snappy (Spark's default), in one process;
- spark-export: plan_export + run_export, the job behind `kfk spark-export`, on a SparkSession with --master (two
  Python workers each reading their share of the offset ranges and writing it to snappy Parquet with pyarrow, the
  driver committing the files). The session's start-up is timed apart, and so is the first export (cold: Spark
  starts its Python workers, which import kfk and pyarrow).
- Spark's own Kafka source: `spark.read.format("kafka")` (spark-sql-kafka-0-10, resolved by kfk.testing.spark_kafka
  into the kfk cache and given to the session with spark.jars; kafka-clients in the JVM, no Python) from earliest
  to latest into snappy Parquet, in the same session, with its defaults (one task per Kafka partition). Its first
  run is timed apart too. The two Parquet outputs of the first runs are then compared in Spark: the same
  (partition, offset, key, value, timestamp) rows both ways (exceptAll), and the same count.

The four are then repeated --repetitions times, interleaved, into new directories; the table shows medians.

MB/s counts key and value bytes. Ratios are against the plain consumer and against consumer -> pyarrow. Figures
depend on what else the machine does: quote them with the machine, and compare rows of one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

MB = 1_000_000


def produce(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> int:
    import confluent_kafka

    from kfk.client import Admin, NewTopic

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.create_topics([NewTopic(topic, partitions, 1)])[topic] is None
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000,
                                         "queue.buffering.max.kbytes": 1_048_576, "enable.idempotence": False,
                                         "acks": 1})
    payloads = [os.urandom(size) for _ in range(256)]
    total = 0
    for number in range(records):
        key = str(number).encode()
        total += len(key) + size
        while True:
            try:
                producer.produce(topic, payloads[number & 255], key=key, partition=number % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        if number % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    return total


def consume_to_null(bootstrap: str, topic: str, records: int, partitions: int) -> float:
    from kfk.client import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "max.poll.records": 10_000, "enable.auto.commit": False})
    assigned = [TopicPartition(topic, partition) for partition in range(partitions)]
    consumer.assign(assigned)
    for tp in assigned:
        consumer.seek(tp, 0)
    seen = 0
    start = time.perf_counter()
    while seen < records:
        seen += len(consumer.poll(1.0))
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


def consume_to_parquet(bootstrap: str, topic: str, partitions: int, directory: Path) -> float:
    import pyarrow.parquet as pq

    from kfk.spark.broker_source import read_broker_range
    from kfk.spark.offsets import OffsetRange
    from kfk.spark.options import SourceOptions

    options = SourceOptions.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=False)
    from kfk.client import Admin, TopicPartition

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        ends = admin.end_offsets([TopicPartition(topic, partition) for partition in range(partitions)])
    directory.mkdir(parents=True)
    start = time.perf_counter()
    for tp, end in sorted(ends.items()):
        writer = None
        for batch in read_broker_range(options, OffsetRange(tp.topic, tp.partition, 0, end)):
            if writer is None:
                writer = pq.ParquetWriter(directory / f"part-{tp.partition}.parquet", batch.schema,
                                          compression="snappy")
            writer.write_batch(batch)
        if writer is not None:
            writer.close()
    return time.perf_counter() - start


def spark_export(spark, bootstrap: str, topic: str, output: Path, master: str) -> tuple[float, int]:
    from kfk.spark.export import ExportRequest, plan_export, run_export

    start = time.perf_counter()
    plan = plan_export(ExportRequest(output=str(output), bootstrap_servers=bootstrap, topics=[topic], master=master))
    summary = run_export(plan, spark=spark)
    return time.perf_counter() - start, summary.rows


def spark_kafka_source(spark, bootstrap: str, topic: str, output: Path) -> float:
    start = time.perf_counter()
    (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
     .option("startingOffsets", "earliest").option("endingOffsets", "latest").load()
     .write.parquet(str(output)))
    return time.perf_counter() - start


def same_rows(spark, exported: Path, read_by_spark: Path, records: int) -> None:
    """Both outputs hold exactly the same rows (and `records` of them); AssertionError otherwise."""
    columns = ["partition", "offset", "key", "value", "timestamp"]
    ours, theirs = (spark.read.parquet(str(path)).select(*columns) for path in (exported, read_by_spark))
    counts = ours.count(), theirs.count()
    assert counts == (records, records), counts
    assert ours.exceptAll(theirs).count() == 0 and theirs.exceptAll(ours).count() == 0, "the outputs differ"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--dir", default=None, help="Where the broker's data and the outputs go (default: a temp dir).")
    args = parser.parse_args()

    from kfk.spark.environment import check_java, check_pyspark, create_session
    from kfk.testing.broker import start_broker
    from kfk.testing.spark_kafka import spark_kafka_connector

    pyspark_version = check_pyspark()
    check_java()
    connector = spark_kafka_connector()
    root = Path(args.dir or tempfile.mkdtemp(prefix="kfk-bench-spark-"))
    root.mkdir(parents=True, exist_ok=True)
    broker = start_broker(root / "broker", {"offsets.topic.replication.factor": "1"})
    try:
        topic = "bench"
        started = time.perf_counter()
        data_bytes = produce(broker.bootstrap_servers, topic, args.records, args.record_size, args.partitions)
        print(f"produced {args.records:,} records ({data_bytes / MB:,.0f} MB) in "
              f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
        bootstrap = broker.bootstrap_servers
        started = time.perf_counter()
        spark = create_session(args.master, "kfk bench", {"spark.ui.enabled": "false",
                                                          "spark.jars": connector.spark_jars})
        session_seconds = time.perf_counter() - started
        cold_seconds, exported = spark_export(spark, bootstrap, topic, root / "spark-cold", args.master)
        assert exported == args.records, exported
        source_cold_seconds = spark_kafka_source(spark, bootstrap, topic, root / "kafka-source-cold")
        same_rows(spark, root / "spark-cold", root / "kafka-source-cold", args.records)
        print("spark-export and Spark's Kafka source wrote the same rows", file=sys.stderr)
        timings: dict[str, list[float]] = {}
        for run in range(args.repetitions):
            timings.setdefault("kfk consumer -> /dev/null", []).append(
                consume_to_null(bootstrap, topic, args.records, args.partitions))
            timings.setdefault("kfk consumer -> pyarrow parquet", []).append(
                consume_to_parquet(bootstrap, topic, args.partitions, root / f"pyarrow-{run}"))
            seconds, exported = spark_export(spark, bootstrap, topic, root / f"spark-{run}", args.master)
            assert exported == args.records, exported
            timings.setdefault(f"spark-export {args.master}", []).append(seconds)
            timings.setdefault(f"spark.read.format(kafka) {args.master}", []).append(
                spark_kafka_source(spark, bootstrap, topic, root / f"kafka-source-{run}"))
            for path in (root / f"pyarrow-{run}", root / f"spark-{run}", root / f"kafka-source-{run}"):
                shutil.rmtree(path, ignore_errors=True)
        rows = [(name, statistics.median(values)) for name, values in timings.items()]
        rows.append((f"spark-export {args.master} (first run)", cold_seconds))
        rows.append((f"spark.read.format(kafka) {args.master} (first run)", source_cold_seconds))
        spark.stop()
    finally:
        broker.stop()
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)

    consumer_seconds, pyarrow_seconds = rows[0][1], rows[1][1]
    source_seconds = timings[f"spark.read.format(kafka) {args.master}"]
    print(f"\n{args.records:,} records x {args.record_size} B, {args.partitions} partitions, "
          f"{data_bytes / MB:,.0f} MB; Python {sys.version.split()[0]}, {os.cpu_count()} cores; pyspark "
          f"{pyspark_version}, spark-sql-kafka-0-10 {connector.version}; SparkSession start-up "
          f"{session_seconds:.1f} s (not counted below); medians of {args.repetitions}\n")
    print(f"{'method':<46} {'seconds':>8} {'rows/s':>10} {'MB/s':>8} {'vs consumer':>12} {'vs pyarrow':>11} "
          f"{'vs Spark kafka':>15}")
    for name, seconds in rows:
        print(f"{name:<46} {seconds:>8.2f} {args.records / seconds:>10,.0f} {data_bytes / MB / seconds:>8.1f} "
              f"{consumer_seconds / seconds:>12.2f} {pyarrow_seconds / seconds:>11.2f} "
              f"{statistics.median(source_seconds) / seconds:>15.2f}")


if __name__ == "__main__":
    main()
