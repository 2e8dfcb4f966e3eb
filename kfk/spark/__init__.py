"""kfk on Spark: a pure-Python Kafka data source for PySpark and the `kfk spark-export` job.

- kfk.spark.source: the data source, format "kfk", with Spark's Kafka-source schema and options (batch and
  streaming); ``register(spark)`` makes it available to a SparkSession.
- kfk.spark.options / offsets: option parsing and offset-range planning, pure Python (no pyspark), so that bad
  input is reported before Spark starts.
- kfk.spark.catalog, broker_source / log_dir_source: where partitions and records come from, a cluster through
  kfk's client or a stopped broker's log dirs through kfk.storage; kfk.spark.arrow_rows turns records into Arrow
  batches.
- kfk.spark.environment: what Spark needs from the machine (pyspark, Java 17+) and a local SparkSession set up for it.
- kfk.spark.export / output: the export job and its exactly-once bookkeeping on the output directory;
  kfk.spark.parquet_tasks: the export's Spark tasks that write Parquet with pyarrow.

pyspark is an optional extra (``pip install 'kfk[spark]'``) and is imported in this package only, and only by the
modules that need it (source, export): importing kfk.spark itself never needs it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register"]


def register(spark: Any) -> None:
    """Make ``spark.read.format("kfk")`` and ``spark.readStream.format("kfk")`` available on this session."""
    from kfk.spark.source import KfkDataSource

    spark.dataSource.register(KfkDataSource)
