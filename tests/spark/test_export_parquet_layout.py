"""The Parquet that spark-export's tasks write with pyarrow is what Spark's own writer makes of the same rows: the
same columns and types as Spark reads them back, the same partition directories, the same rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from tests.spark.conftest import create_topic, produce_json  # noqa: E402
from tests.spark.test_export import export  # noqa: E402

pytestmark = pytest.mark.spark


def directories(root: Path) -> set[str]:
    return {str(path.parent.relative_to(root)) for path in root.rglob("part-*")}


def test_pyarrow_files_equal_sparks_for_decoded_and_partitioned_exports(spark: Any, kfk_broker: str,
                                                                        tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    create_topic(kfk_broker, "layout", 2)
    produce_json(kfk_broker, "layout", 0, 3_000, codecs=("zstd",))
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    result = export("--bootstrap-server", kfk_broker, "--topic", "layout", "--output", str(ours),
                    "--include-headers", "--decode", "key=string,value=string", "--partition-by", "date,partition")
    assert result.exit_code == 0, result.output
    # Spark's writer on the "kfk" data source, decoded and partitioned as the export's Spark path does.
    frame = (spark.read.format("kfk").option("kafka.bootstrap.servers", kfk_broker).option("subscribe", "layout")
             .option("includeHeaders", "true").load())
    (frame.select(F.col("key").cast("string").alias("key"), F.col("value").cast("string").alias("value"),
                  "topic", "partition", "offset", "timestamp", "timestampType", "headers")
     .withColumn("date", F.expr("to_date(timestamp)"))
     .write.partitionBy("date", "partition").parquet(str(theirs)))
    assert directories(ours) == directories(theirs) and len(directories(ours)) >= 2
    read_ours, read_theirs = spark.read.parquet(str(ours)), spark.read.parquet(str(theirs))
    assert read_ours.schema == read_theirs.schema
    assert read_ours.count() == read_theirs.count() == 3_000
    assert read_ours.exceptAll(read_theirs).count() == 0 and read_theirs.exceptAll(read_ours).count() == 0
