"""`kfk spark-export` against Spark's own Kafka source (spark-sql-kafka-0-10, the connector Spark users read Kafka
with): both read the same topic of a kfk broker into Parquet in the same SparkSession, and the files hold the same
rows, field for field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

import pyarrow.parquet as pq  # noqa: E402

from kfk.spark.export import ExportRequest, plan_export, run_export  # noqa: E402
from tests.spark.conftest import create_topic, produce_json  # noqa: E402

pytestmark = pytest.mark.spark

COLUMNS = ("topic", "partition", "offset", "key", "value", "timestamp", "timestampType", "headers")


def parquet_rows(directory: Path) -> list[tuple]:
    """Every row of the Parquet files under `directory` (files named _* or .* are not data), sorted."""
    table = pq.read_table(directory)
    assert sorted(table.column_names) == sorted(COLUMNS), table.column_names
    columns = [table.column(name).to_pylist() for name in COLUMNS]
    rows = []
    for topic, partition, offset, key, value, timestamp, timestamp_type, headers in zip(*columns):
        rows.append((topic, partition, offset, key, value, timestamp, timestamp_type,
                     tuple((header["key"], header["value"]) for header in headers)))
    return sorted(rows)


def test_spark_export_writes_what_sparks_kafka_source_reads(spark: Any, kfk_broker: str, tmp_path: Path) -> None:
    create_topic(kfk_broker, "both", partitions=3)
    produced = produce_json(kfk_broker, "both", 0, 900)

    plan = plan_export(ExportRequest(output=str(tmp_path / "kfk"), bootstrap_servers=kfk_broker, topics=["both"],
                                     source_options={"includeHeaders": "true"}))
    assert run_export(plan, spark=spark).rows == 900
    (spark.read.format("kafka").option("kafka.bootstrap.servers", kfk_broker).option("subscribe", "both")
     .option("startingOffsets", "earliest").option("endingOffsets", "latest").option("includeHeaders", "true")
     .load().write.parquet(str(tmp_path / "spark")))

    exported, read_by_spark = parquet_rows(tmp_path / "kfk"), parquet_rows(tmp_path / "spark")
    assert len(read_by_spark) == 900
    assert exported == read_by_spark
    assert {(row[1], row[2], row[3], row[4], row[7]) for row in exported} == {
        (p.partition, p.offset, p.key, p.value, p.headers) for p in produced}
