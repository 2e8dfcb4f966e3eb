"""`kfk spark-export` end to end: a real broker, records written by confluent-kafka (librdkafka: lz4 and zstd
batches, headers), a real local SparkSession, the files read back by Spark and by pyarrow."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

import pyarrow.parquet as pq  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from kfk.cli import app  # noqa: E402
from tests.spark.conftest import Produced, create_topic, produce_json  # noqa: E402

pytestmark = pytest.mark.spark


def export(*args: str) -> Any:
    return CliRunner().invoke(app, ["spark-export", "--master", "local[2]", *args], catch_exceptions=False)


def expected_rows(produced: list[Produced]) -> dict[tuple[int, int], tuple[bytes, bytes, list]]:
    return {(p.partition, p.offset): (p.key, p.value, [list(header) for header in p.headers]) for p in produced}


def spark_rows(spark: Any, path: Path) -> list[tuple[int, int, bytes, bytes, list]]:
    frame = spark.read.parquet(str(path))
    has_headers = "headers" in frame.columns
    return [(row["partition"], row["offset"], bytes(row["key"]), bytes(row["value"]),
             [[header["key"], bytes(header["value"])] for header in row["headers"]] if has_headers else [])
            for row in frame.collect()]


def arrow_rows(path: Path) -> list[tuple[int, int, bytes, bytes, list]]:
    table = pq.read_table(path).to_pydict()
    headers = table.get("headers") or [[] for _ in table["offset"]]
    return [(partition, offset, key, value, [[h["key"], h["value"]] for h in header_list])
            for partition, offset, key, value, header_list in zip(table["partition"], table["offset"], table["key"],
                                                                 table["value"], headers)]


def assert_exactly(rows: list[tuple[int, int, bytes, bytes, list]], produced: list[Produced],
                   with_headers: bool = True) -> None:
    keyed = {(partition, offset): (key, value, headers) for partition, offset, key, value, headers in rows}
    assert len(keyed) == len(rows), "duplicate rows"
    expected = expected_rows(produced)
    if not with_headers:
        expected = {position: (key, value, []) for position, (key, value, _) in expected.items()}
    assert keyed == expected


def test_export_to_parquet_is_exactly_what_was_produced(spark: Any, kfk_broker: str, tmp_path: Path) -> None:
    create_topic(kfk_broker, "events", 3)
    produced = produce_json(kfk_broker, "events", 0, 30_000)
    output = tmp_path / "events"
    result = export("--bootstrap-server", kfk_broker, "--topic", "events", "--output", str(output),
                    "--include-headers", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["rows"] == 30_000 and summary["files"] >= 3 and summary["bytes"] > 0
    ends = {p: max(r.offset for r in produced if r.partition == p) + 1 for p in range(3)}
    assert {(entry["partition"], entry["until_offset"]) for entry in summary["partitions"]} == set(ends.items())
    assert_exactly(spark_rows(spark, output), produced)
    assert_exactly(arrow_rows(output), produced)
    assert pq.read_table(output).schema.field("timestamp").type.unit == "us"
    manifest = json.loads((output / "_kfk_export.json").read_text())
    assert manifest["ranges"] == {"events": {str(p): [[0, end]] for p, end in ends.items()}}
    # The same offsets again would duplicate rows: refused before Spark runs, and the output is untouched.
    again = export("--bootstrap-server", kfk_broker, "--topic", "events", "--output", str(output))
    assert again.exit_code == 1 and "already holds events-0 offsets 0.." in again.output
    # resume exports only what came after.
    more = produce_json(kfk_broker, "events", 30_000, 300, codecs=("zstd",))
    resumed = export("--bootstrap-server", kfk_broker, "--topic", "events", "--output", str(output),
                     "--starting-offsets", "resume", "--include-headers", "--json")
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout)["rows"] == 300
    assert_exactly(arrow_rows(output), produced + more)
    idle = export("--bootstrap-server", kfk_broker, "--topic", "events", "--output", str(output),
                  "--starting-offsets", "resume", "--json")
    assert idle.exit_code == 0 and json.loads(idle.stdout)["rows"] == 0
    assert "nothing to export" in " ".join(json.loads(idle.stdout)["notes"])


def test_export_leaves_out_aborted_transactions_unless_told_otherwise(kfk_broker: str, tmp_path: Path) -> None:
    import confluent_kafka

    create_topic(kfk_broker, "orders", 1)
    producer = confluent_kafka.Producer({"bootstrap.servers": kfk_broker, "transactional.id": "orders-writer",
                                         "linger.ms": 0})
    producer.init_transactions(30)
    for outcome in ("committed", "aborted"):
        producer.begin_transaction()
        for n in range(3):
            producer.produce("orders", f"{outcome}-{n}".encode(), key=b"k", partition=0)
        assert producer.flush(10) == 0
        if outcome == "committed":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    default = export("--bootstrap-server", kfk_broker, "--topic", "orders", "--output", str(tmp_path / "default"))
    assert default.exit_code == 0, default.output
    assert sorted(value for *_, value, _ in arrow_rows(tmp_path / "default")) == [
        b"committed-0", b"committed-1", b"committed-2"]
    everything = export("--bootstrap-server", kfk_broker, "--topic", "orders", "--output", str(tmp_path / "all"),
                        "--isolation-level", "read_uncommitted")
    assert everything.exit_code == 0, everything.output
    assert len(arrow_rows(tmp_path / "all")) == 6

def stream(kfk_broker: str, topic: str, output: Path, checkpoint: Path, *extra: str) -> Any:
    return export("--bootstrap-server", kfk_broker, "--topic", topic, "--output", str(output), "--stream",
                  "--checkpoint", str(checkpoint), "--json", *extra)


def test_streaming_available_now_exports_only_new_records(spark: Any, kfk_broker: str, tmp_path: Path) -> None:
    create_topic(kfk_broker, "clicks", 3)
    output, checkpoint = tmp_path / "clicks", tmp_path / "checkpoint"
    first = produce_json(kfk_broker, "clicks", 0, 10_000)
    result = stream(kfk_broker, "clicks", output, checkpoint)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rows"] == 10_000
    assert_exactly(spark_rows(spark, output), first, with_headers=False)
    second = produce_json(kfk_broker, "clicks", 10_000, 5_000)
    result = stream(kfk_broker, "clicks", output, checkpoint, "--max-offsets-per-trigger", "2000")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["rows"] == 5_000
    assert sum(entry["offsets"] for entry in summary["partitions"]) == 5_000
    assert len([name for name in os.listdir(checkpoint / "commits") if name.isdigit()]) >= 1 + 3
    assert_exactly(spark_rows(spark, output), first + second, with_headers=False)
    assert_exactly(arrow_rows(output), first + second, with_headers=False)
    # The checkpoint belongs to this output: a new one on the same output is refused.
    refused = stream(kfk_broker, "clicks", output, tmp_path / "other-checkpoint")
    assert refused.exit_code == 1 and "checkpoint" in refused.output and "is new" in refused.output


def test_a_killed_streaming_export_resumes_exactly(spark: Any, kfk_broker: str, tmp_path: Path) -> None:
    create_topic(kfk_broker, "payments", 3)
    output, checkpoint = tmp_path / "payments", tmp_path / "checkpoint"
    produced = produce_json(kfk_broker, "payments", 0, 20_000)
    command = [sys.executable, "-m", "kfk", "spark-export", "--bootstrap-server", kfk_broker, "--topic", "payments",
               "--output", str(output), "--stream", "--checkpoint", str(checkpoint), "--master", "local[2]",
               "--max-offsets-per-trigger", "1000", "--spark-conf", "spark.ui.enabled=false"]
    job = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        commits = checkpoint / "commits"
        while time.monotonic() < deadline and job.poll() is None:
            if commits.is_dir() and sum(name.isdigit() for name in os.listdir(commits)) >= 2:
                break
            time.sleep(0.05)
        assert job.poll() is None, "the export finished before it could be killed"
        os.kill(job.pid, signal.SIGKILL)
        job.wait(10)
    finally:
        try:
            os.killpg(job.pid, signal.SIGKILL)  # the JVM and Python workers it started
        except ProcessLookupError:
            pass
    committed = sum(name.isdigit() for name in os.listdir(checkpoint / "commits"))
    assert 2 <= committed < 20, "the job was not killed mid-way"
    result = stream(kfk_broker, "payments", output, checkpoint)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rows"] < 20_000
    assert_exactly(spark_rows(spark, output), produced, with_headers=False)
    assert_exactly(arrow_rows(output), produced, with_headers=False)


def test_offline_export_from_the_log_dir_equals_the_online_one(spark: Any, kfk_broker_process: Any,
                                                               tmp_path: Path) -> None:
    bootstrap = kfk_broker_process.bootstrap_servers
    create_topic(bootstrap, "ledger", 3)
    produced = produce_json(bootstrap, "ledger", 0, 6_000)
    online, offline = tmp_path / "online", tmp_path / "offline"
    result = export("--bootstrap-server", bootstrap, "--topic", "ledger", "--output", str(online),
                    "--include-headers", "--json")
    assert result.exit_code == 0, result.output
    refused = export("--log-dir", str(kfk_broker_process.log_dir), "--topic", "ledger", "--output", str(offline))
    assert refused.exit_code == 1 and "is running on the log dir" in refused.output
    kfk_broker_process.stop()
    result = export("--log-dir", str(kfk_broker_process.log_dir), "--topic", "ledger", "--output", str(offline),
                    "--include-headers", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rows"] == 6_000
    columns = ["partition", "offset", "key", "value", "topic", "timestamp", "timestampType", "headers"]
    online_rows = sorted(spark.read.parquet(str(online)).select(*columns).collect())
    offline_rows = sorted(spark.read.parquet(str(offline)).select(*columns).collect())
    assert offline_rows == online_rows
    assert_exactly(arrow_rows(offline), produced)
