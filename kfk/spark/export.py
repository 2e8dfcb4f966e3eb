"""The export job behind `kfk spark-export`: topics to Parquet, JSON, CSV or ORC files through Spark.

Two phases, so that bad input fails in a second and before any JVM starts:
- ``plan_export`` (no Spark): parse the source options, look the topics up (cluster or log dir), resolve the offset
  ranges, check the output directory against what it already holds (kfk.spark.output), and sample values when the
  JSON schema must be inferred;
- ``run_export``: start (or reuse) a SparkSession, then commit (batch) or let Spark's checkpoint and file sink
  commit (streaming). Progress goes to a callback. A batch Parquet export runs tasks that read their offset range
  and write Parquet with pyarrow themselves (kfk.spark.parquet_tasks: no row crosses into the JVM); what only
  Spark's writer does (JSON, CSV and ORC, a JSON value's inferred schema, partition columns whose directory names
  Spark escapes, streaming's file sink) reads with the "kfk" data source, decodes and flattens in Spark, and
  writes with Spark.

A run stops when asked to (``stop``, a threading.Event: the CLI sets it on Ctrl-C), between two of its calls into
the JVM: a batch cancels its job, drops what its run wrote and raises ExportInterrupted (so does a streaming run
whose query has not started); a streaming query is stopped and the run ends with its summary (the same checkpoint
goes on from there). A session the run started is stopped when the run ends, whichever way
(kfk.spark.environment.session_for_a_run).

The batch read uses the planned ranges as explicit startingOffsets/endingOffsets, so the job reads exactly what
the plan checked and what the commit records, even if the topic grows meanwhile.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kfk.common.structs import TopicPartition
from kfk.errors import InvalidConfigurationError
from kfk.spark.catalog import open_catalog, read_range
from kfk.spark.offsets import (
    OffsetRange,
    offsets_from_document,
    plan_batch,
    resolve_offsets,
    split_ranges,
)
from kfk.spark.options import SourceOptions, partition_offsets_to_json
from kfk.spark.output import BatchOutput, StreamOutput
from kfk.spark.parquet_tasks import (
    ARROW_PARTITION_COLUMNS,
    PARQUET_CODECS,
    ParquetLayout,
    TaskFile,
    write_empty_file,
    write_range,
)

__all__ = ["Decode", "ExportInterrupted", "ExportPlan", "ExportRequest", "ExportSummary", "plan_export",
           "run_export"]

FORMATS = ("parquet", "json", "csv", "orc")
JSON_SAMPLE_RECORDS = 1000
VALUE_SCHEMA_FILE = "_kfk_value_schema.json"
DERIVED_PARTITION_COLUMNS = {"date": "to_date(timestamp)", "hour": "hour(timestamp)"}
MIN_OFFSETS_PER_TASK = 20_000
METADATA_COLUMNS = ("topic", "partition", "offset", "timestamp", "timestampType")


@dataclass(frozen=True)
class Decode:
    """--decode key=binary|string,value=binary|string|json|avro (avro: Confluent's wire format, the schema from
    the schema registry)."""

    key: str = "binary"
    value: str = "binary"

    @classmethod
    def parse(cls, text: str | None) -> Decode:
        if not text:
            return cls()
        chosen = {"key": "binary", "value": "binary"}
        allowed = {"key": ("binary", "string"), "value": ("binary", "string", "json", "avro")}
        for part in text.split(","):
            name, _, kind = part.strip().partition("=")
            name, kind = name.strip(), kind.strip().lower()
            if name not in allowed or kind not in allowed[name]:
                raise InvalidConfigurationError(
                    f"--decode {text!r}: expected key=binary|string and/or value=binary|string|json|avro, "
                    f"got {part.strip()!r}")
            chosen[name] = kind
        return cls(**chosen)


@dataclass
class ExportRequest:
    output: str
    bootstrap_servers: str | None = None
    log_dir: str | None = None
    topics: list[str] = field(default_factory=list)
    pattern: str | None = None
    output_format: str = "parquet"
    starting_offsets: str | None = None
    ending_offsets: str | None = None
    partition_by: list[str] = field(default_factory=list)
    decode: Decode = field(default_factory=Decode)
    value_schema: str | None = None
    schema_registry_url: str | None = None
    """--decode value=avro: the schema registry giving the topics' latest value schema and the writers' schemas."""
    master: str = "local[*]"
    stream: bool = False
    checkpoint: str | None = None
    trigger: str = "available-now"
    spark_conf: dict[str, str] = field(default_factory=dict)
    source_options: dict[str, str] = field(default_factory=dict)
    overwrite: bool = False
    verbose: bool = False
    """Spark's own log (WARN and up) on stderr; otherwise only errors, in the JVM's log file."""


@dataclass
class ExportPlan:
    request: ExportRequest
    options: dict[str, str]
    source: SourceOptions
    ranges: list[OffsetRange]
    """Batch: the ranges to export. Streaming: from where this run starts to the end at planning time."""
    batch_output: BatchOutput | None
    stream_output: StreamOutput | None
    value_samples: list[str]
    value_schema: str | None
    notes: list[str]

    @property
    def total_offsets(self) -> int:
        return sum(offset_range.size for offset_range in self.ranges)


@dataclass
class ExportSummary:
    rows: int
    bytes: int
    files: int
    ranges: list[OffsetRange]
    seconds: float
    output: str
    notes: list[str]


ProgressCallback = Callable[[int, int, str], None]
"""(offsets done, offsets in all, a short status) — called from the job's thread."""


class ExportInterrupted(Exception):
    """An export stopped on request before it committed (batch) or started its query (streaming): nothing of its
    run reached the output."""


def _parse_trigger(trigger: str) -> str | None:
    """None for available-now, else Spark's processingTime interval ("10 seconds")."""
    text = trigger.strip().lower()
    if text in ("available-now", "availablenow", "available_now"):
        return None
    units = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours"}
    for suffix, unit in sorted(units.items(), key=lambda item: -len(item[0])):
        number = text[:-len(suffix)].strip()
        if text.endswith(suffix) and number.isdigit() and int(number) > 0:
            return f"{int(number)} {unit}"
    raise InvalidConfigurationError(f"--trigger {trigger!r}: expected available-now or an interval such as 30s, "
                                    "500ms, 5m or 1h")


def _source_options(request: ExportRequest) -> dict[str, str]:
    options: dict[str, str] = {}
    if request.log_dir:
        options["logDir"] = request.log_dir
    if request.bootstrap_servers:
        options["kafka.bootstrap.servers"] = request.bootstrap_servers
    if request.topics and request.pattern:
        raise InvalidConfigurationError("give --topic or --pattern, not both")
    if request.topics:
        options["subscribe"] = ",".join(request.topics)
    elif request.pattern:
        options["subscribePattern"] = request.pattern
    else:
        raise InvalidConfigurationError("give the topics to export: --topic NAME (repeatable) or --pattern REGEX")
    for side, text in (("starting", request.starting_offsets), ("ending", request.ending_offsets)):
        if text is None or text.strip() == "":
            continue
        text = text.strip()
        if text.lower() == "resume":
            if side != "starting":
                raise InvalidConfigurationError("--ending-offsets resume makes no sense; resume is a starting point")
            continue  # filled in once the partitions are known
        if text.lower().startswith("ts:"):
            moment = text[3:].strip()
            if moment.startswith("{"):
                options[f"{side}OffsetsByTimestamp"] = moment
            else:
                options[f"{side}Timestamp"] = str(_epoch_ms(moment, f"--{side}-offsets"))
        else:
            options[f"{side}Offsets"] = text
    if request.stream and "startingOffsets" not in options and not any(
            key.startswith("starting") for key in options):
        options["startingOffsets"] = "earliest"  # an export starts at the beginning, unlike Spark's stream default
    for key, value in request.source_options.items():
        options[key] = value
    return options


def _epoch_ms(text: str, flag: str) -> int:
    if text.lstrip("-").isdigit():
        return int(text)
    from datetime import datetime, timezone

    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidConfigurationError(f"{flag} ts:{text}: expected epoch milliseconds or an ISO-8601 time "
                                        "such as 2024-05-01T00:00:00Z") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def plan_export(request: ExportRequest) -> ExportPlan:
    """Everything that can be checked without Spark; raises a KafkaError subclass with a clear message."""
    if request.output_format not in FORMATS:
        raise InvalidConfigurationError(f"--format {request.output_format!r}: expected one of {', '.join(FORMATS)}")
    if bool(request.bootstrap_servers) == bool(request.log_dir):
        raise InvalidConfigurationError("give --bootstrap-server (a running cluster) or --log-dir (a stopped "
                                        "broker's log dir), exactly one")
    if request.stream and not request.checkpoint:
        raise InvalidConfigurationError("--stream needs --checkpoint DIR: Spark keeps the exported offsets there")
    if not request.stream and request.checkpoint:
        raise InvalidConfigurationError("--checkpoint is for --stream exports")
    trigger = _parse_trigger(request.trigger) if request.stream else None
    if request.stream and request.log_dir and trigger is not None:
        raise InvalidConfigurationError("a log dir does not grow: use --trigger available-now with --log-dir")
    if request.value_schema and request.decode.value != "json":
        raise InvalidConfigurationError("--value-schema is for --decode value=json")
    if request.decode.value == "avro" and not request.schema_registry_url:
        raise InvalidConfigurationError("Avro values need --schema-registry-url (their schemas are in the registry)")
    for column in request.partition_by:
        if not column:
            raise InvalidConfigurationError("--partition-by has an empty column name")
    resume = (request.starting_offsets or "").strip().lower() == "resume"
    if resume and request.stream:
        raise InvalidConfigurationError("--starting-offsets resume is for batch exports; a --stream export resumes "
                                        "from its --checkpoint")
    options = _source_options(request)
    source = SourceOptions.parse(options, streaming=request.stream)
    notes: list[str] = []
    catalog = open_catalog(source)
    try:
        if request.stream:
            stream_output = StreamOutput(request.output, request.checkpoint or "")
            if request.overwrite:
                notes.append("--overwrite: the output and the checkpoint start over")
            else:
                stream_output.check(overwrite=False)
            partitions = catalog.topic_partitions(source.topics)
            committed = None if request.overwrite else stream_output.last_committed_offsets()
            if committed is not None:
                starts = offsets_from_document(committed)
                new = [tp for tp in partitions if tp not in starts]
                starts.update(catalog.earliest_offsets(new))
                notes.append("resuming from the checkpoint's last committed micro-batch")
            else:
                starts = resolve_offsets(catalog, source.starting, partitions, option="startingOffsets",
                                         no_match=source.starting_by_timestamp_strategy)
            latest = catalog.latest_offsets(partitions)
            ranges = [OffsetRange(tp.topic, tp.partition, starts.get(tp, latest[tp]),
                                  max(latest[tp], starts.get(tp, latest[tp]))) for tp in partitions]
            batch_output = None
        else:
            batch_output = BatchOutput(request.output, request.output_format)
            stream_output = None
            notes.extend(batch_output.recover())
            if resume:
                partitions = catalog.topic_partitions(source.topics)
                ends = batch_output.resume_offsets()
                earliest = catalog.earliest_offsets(tp for tp in partitions if tp not in ends)
                starts = {tp: ends.get(tp, earliest.get(tp, 0)) for tp in partitions}
                options["startingOffsets"] = json.dumps(partition_offsets_to_json(starts))
                source = SourceOptions.parse(options, streaming=False)
            ranges = plan_batch(catalog, source)
            batch_output.check(ranges, request.overwrite)
        value_schema = request.value_schema
        if request.decode.value == "avro":
            from kfk.spark.avro_columns import latest_value_schema

            topics = sorted({offset_range.topic for offset_range in ranges})
            if topics:
                value_schema = latest_value_schema(request.schema_registry_url or "", topics)
        if value_schema is None and request.decode.value == "json":
            value_schema = _saved_value_schema(request, batch_output, stream_output)
        samples: list[str] = []
        if request.decode.value == "json" and value_schema is None:
            samples = _sample_values(source, ranges)
            if not samples:
                raise InvalidConfigurationError(
                    "cannot infer the JSON schema of the values: the offsets to export hold no record; give "
                    "--value-schema (a Spark DDL string such as 'id BIGINT, name STRING')")
    finally:
        catalog.close()
    return ExportPlan(request, options, source, ranges, batch_output, stream_output, samples, value_schema, notes)


def _saved_value_schema(request: ExportRequest, batch_output: BatchOutput | None,
                        stream_output: StreamOutput | None) -> str | None:
    """The schema earlier runs wrote with, so that appended files agree with the ones already there."""
    if request.overwrite:
        return None
    if batch_output is not None:
        manifest = batch_output.manifest()
        return None if manifest is None else manifest.get("value_schema")
    if stream_output is not None and stream_output.checkpoint_path is not None:
        path = stream_output.checkpoint_path / VALUE_SCHEMA_FILE
        if path.exists():
            return json.loads(path.read_text(encoding="utf-8"))["value_schema"]
    return None


def _sample_values(source: SourceOptions, ranges: list[OffsetRange]) -> list[str]:
    """Up to JSON_SAMPLE_RECORDS values from the start of the ranges, for schema inference."""
    samples: list[str] = []
    live = [offset_range for offset_range in ranges if offset_range.size]
    if not live:
        return samples
    per_range = max(1, JSON_SAMPLE_RECORDS // len(live))
    for offset_range in live:
        head = offset_range._replace(until_offset=min(offset_range.until_offset,
                                                      offset_range.from_offset + per_range))
        for batch in read_range(source, head):
            for value in batch.column("value").to_pylist():
                if value is not None:
                    samples.append(value.decode("utf-8", errors="replace"))
    return samples


# --- Spark ---------------------------------------------------------------------------------------------------------


def _value_columns(spark: Any, plan: ExportPlan, frame: Any) -> tuple[Any, str | None]:
    """The frame with key/value decoded (and a JSON or Avro record value flattened); also the value schema used
    (DDL/JSON, or the Avro reader schema)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    decode = plan.request.decode
    key = F.col("key").cast("string").alias("key") if decode.key == "string" else F.col("key")
    rest = [F.col(name) for name in METADATA_COLUMNS]
    if plan.source.include_headers:
        rest.append(F.col("headers"))
    if decode.value == "binary":
        return frame.select(key, F.col("value"), *rest), None
    if decode.value == "string":
        return frame.select(key, F.col("value").cast("string").alias("value"), *rest), None
    if decode.value == "avro":
        import fastavro

        from kfk.spark.avro_columns import avro_decoder, spark_type

        schema_text = plan.value_schema or "null"
        named: dict[str, Any] = {}
        reader = fastavro.parse_schema(json.loads(schema_text), named_schemas=named)
        value_type = spark_type(reader, named)
        decoded = F.udf(avro_decoder(schema_text, plan.request.schema_registry_url or ""), value_type, useArrow=False)
        column = decoded(F.col("value")).alias("value")
        if not isinstance(value_type, StructType):  # a primitive, array or map schema: one value column
            return frame.select(key, column, *rest), schema_text
        parsed = frame.select(key, column, *rest)
    elif plan.value_schema is not None:
        schema_text = plan.value_schema
        try:
            schema: Any = StructType.fromJson(json.loads(schema_text))
        except (ValueError, TypeError, KeyError):
            schema = schema_text  # a DDL string, which from_json takes as it is
    else:
        sample = spark.createDataFrame([(text,) for text in plan.value_samples], "value STRING")
        schema = spark.read.json(sample.rdd.map(lambda row: row[0])).schema
        if "_corrupt_record" in schema.fieldNames():
            schema = StructType([f for f in schema.fields if f.name != "_corrupt_record"])
        if not schema.fields:
            raise InvalidConfigurationError("the sampled values are not JSON objects; use --decode value=string or "
                                            "give --value-schema")
        schema_text = schema.json()
    if decode.value == "json":
        parsed = frame.select(key, F.from_json(F.col("value").cast("string"), schema).alias("value"), *rest)
    taken = {"key", *METADATA_COLUMNS, "headers"}
    fields = parsed.schema["value"].dataType.fieldNames()
    flattened = [F.col("value").getField(name).alias(f"value_{name}" if name in taken else name)
                 for name in fields]
    return parsed.select(key, *flattened, *rest), schema_text


def _prepare_frame(spark: Any, plan: ExportPlan, frame: Any) -> tuple[Any, list[str], str | None]:
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, BinaryType, MapType, StructType

    frame, schema_text = _value_columns(spark, plan, frame)
    partition_columns = []
    for name in plan.request.partition_by:
        if name in DERIVED_PARTITION_COLUMNS and name not in frame.columns:
            frame = frame.withColumn(name, F.expr(DERIVED_PARTITION_COLUMNS[name]))
        elif name not in frame.columns:
            raise InvalidConfigurationError(
                f"--partition-by {name!r}: no such column (columns: {', '.join(frame.columns)}; or a date or hour "
                "derived from timestamp)")
        partition_columns.append(name)
    if plan.request.output_format == "csv":
        # CSV has no binary or nested types: bytes become base64, nested values JSON.
        for column in frame.schema.fields:
            if isinstance(column.dataType, BinaryType):
                frame = frame.withColumn(column.name, F.base64(F.col(column.name)))
            elif isinstance(column.dataType, (ArrayType, MapType, StructType)):
                frame = frame.withColumn(column.name, F.to_json(F.col(column.name)))
    return frame, partition_columns, schema_text


def _task_count(plan: ExportPlan, default_parallelism: int) -> int | None:
    """minPartitions for a batch export: enough tasks for progress and for every core, none tiny."""
    if "minPartitions" in plan.options or not plan.ranges:
        return None
    wanted = max(len(plan.ranges), 4 * default_parallelism)
    return max(1, min(wanted, plan.total_offsets // MIN_OFFSETS_PER_TASK))


def run_export(plan: ExportPlan, progress: ProgressCallback | None = None, spark: Any = None,
               stop: threading.Event | None = None) -> ExportSummary:
    """Run the planned export on Spark (a session of its own unless ``spark`` is given); once ``stop`` is set, the
    run ends as the module's docstring says."""
    from kfk.spark.environment import session_for_a_run

    request = plan.request
    if not request.stream and plan.total_offsets == 0:
        # Nothing new (a resume with no new records, empty partitions): no reason to start Spark.
        return ExportSummary(0, 0, 0, plan.ranges, 0.0, request.output,
                             plan.notes + ["nothing to export: the offset ranges are empty"])
    stop = stop or threading.Event()
    notify = progress or (lambda done, total, status: None)
    try:
        with contextlib.ExitStack() as resources:
            if spark is None:
                spark = resources.enter_context(
                    session_for_a_run(request.master, "kfk spark-export", request.spark_conf, request.verbose))
            if stop.is_set():  # while the session started
                raise ExportInterrupted()
            if request.stream:
                return _run_stream(spark, plan, notify, stop)
            return _run_batch(spark, plan, notify, stop)
    except BaseException:
        # Once more now that the session has stopped: a cancelled task can still write into the staging dir after
        # the job's own clean-up (seen under load), and nothing of a failed or interrupted run may stay behind.
        if plan.batch_output is not None:
            plan.batch_output.abandon()
        raise


def _run_batch(spark: Any, plan: ExportPlan, notify: ProgressCallback, stop: threading.Event) -> ExportSummary:
    request, output = plan.request, plan.batch_output
    assert output is not None
    started = time.monotonic()
    layout = _arrow_layout(spark, plan)
    if layout is not None:
        rows, schema_text = _write_with_arrow(spark, plan, layout, notify, stop), None
    else:
        rows, schema_text = _write_with_spark(spark, plan, notify, stop)
    total = plan.total_offsets
    notify(total, total, f"{rows:,} rows written, committing")
    extra = {"value_schema": schema_text} if schema_text is not None else None
    result = output.commit(plan.ranges, rows, request.overwrite, extra)
    return ExportSummary(rows, result.bytes, result.files, plan.ranges, time.monotonic() - started,
                         str(output.path), plan.notes)


def _arrow_layout(spark: Any, plan: ExportPlan) -> ParquetLayout | None:
    """The layout for tasks that write Parquet with pyarrow (kfk.spark.parquet_tasks), or None where only Spark's
    writer gives the output asked for: other formats (pyarrow has no JSON writer; CSV and ORC keep Spark's
    conventions), a JSON value (Spark infers its schema and parses it with from_json), partition columns whose
    directory names Spark escapes, and session settings pyarrow would not honour the same way."""
    request = plan.request
    conf = spark.conf
    codec = PARQUET_CODECS.get(str(conf.get("spark.sql.parquet.compression.codec", "snappy")).lower())
    if (request.output_format != "parquet" or request.decode.value in ("json", "avro") or codec is None
            or not set(request.partition_by) <= ARROW_PARTITION_COLUMNS
            or len(set(request.partition_by)) != len(request.partition_by)
            or str(conf.get("spark.sql.parquet.outputTimestampType", "INT96")).upper() != "TIMESTAMP_MICROS"):
        return None
    return ParquetLayout(request.decode.key, request.decode.value, tuple(request.partition_by), codec,
                         str(conf.get("spark.sql.session.timeZone", "UTC")))


def _write_with_arrow(spark: Any, plan: ExportPlan, layout: ParquetLayout, notify: ProgressCallback,
                      stop: threading.Event) -> int:
    """One Spark task per offset range (split as the data source would), each writing its own files in the staging
    dir; only the files of the attempts Spark took stay there. Returns the rows written."""
    output = plan.batch_output
    assert output is not None
    tasks = _task_count(plan, spark.sparkContext.defaultParallelism)
    pieces = split_ranges(plan.ranges, plan.source.min_partitions if tasks is None else tasks)
    write = functools.partial(write_range, plan.source, layout, str(output.staging))
    job = spark.sparkContext.parallelize(list(enumerate(pieces)), max(1, len(pieces))).flatMap(write)
    files: list[TaskFile] = _run_job(spark, plan, job.collect, notify, stop)
    if not files and not layout.partition_by:
        files = [write_empty_file(plan.source, layout, str(output.staging))]
    output.discard_except(file.path for file in files)
    return sum(file.rows for file in files)


def _write_with_spark(spark: Any, plan: ExportPlan, notify: ProgressCallback,
                      stop: threading.Event) -> tuple[int, str | None]:
    """The "kfk" data source read into Spark's own writer; returns the rows written and the JSON value schema
    used, if any."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    request, output = plan.request, plan.batch_output
    assert output is not None
    offsets = {offset_range.topic_partition: offset_range for offset_range in plan.ranges}
    options = dict(plan.options)
    if plan.ranges:
        options["startingOffsets"] = json.dumps(partition_offsets_to_json(
            {tp: r.from_offset for tp, r in offsets.items()}))
        options["endingOffsets"] = json.dumps(partition_offsets_to_json(
            {tp: r.until_offset for tp, r in offsets.items()}))
        for key in ("startingTimestamp", "startingOffsetsByTimestamp", "endingTimestamp", "endingOffsetsByTimestamp"):
            options.pop(key, None)
    tasks = _task_count(plan, spark.sparkContext.defaultParallelism)
    if tasks is not None:
        options["minPartitions"] = str(tasks)
    frame = spark.read.format("kfk").options(**options).load()
    frame, partition_columns, schema_text = _prepare_frame(spark, plan, frame)
    observation = Observation("kfk-export")
    frame = frame.observe(observation, F.count(F.lit(1)).alias("rows"))
    writer = frame.write.format(request.output_format).mode("errorifexists")
    if request.output_format == "csv":
        writer = writer.option("header", "true")
    if partition_columns:
        writer = writer.partitionBy(*partition_columns)
    _run_job(spark, plan, lambda: writer.save(str(output.staging)), notify, stop)
    rows = int(observation.get.get("rows", 0)) if plan.ranges else 0
    return rows, schema_text


_Result = TypeVar("_Result")


def _run_job(spark: Any, plan: ExportPlan, job: Callable[[], _Result], notify: ProgressCallback,
             stop: threading.Event) -> _Result:
    """Run a batch export's Spark job in a thread of its own, in a job group whose finished tasks are the progress;
    ``stop`` (or a KeyboardInterrupt, when the caller runs this in its main thread) cancels it. If it fails or is
    cancelled, nothing of the run reaches the output."""
    output = plan.batch_output
    assert output is not None
    total = plan.total_offsets
    group = f"kfk-export-{output.run_id}"
    outcome: list[_Result] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            spark.sparkContext.setJobGroup(group, "kfk spark-export")
            outcome.append(job())
        except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
            failure.append(error)

    thread = threading.Thread(target=run, name="kfk-spark-export", daemon=True)
    thread.start()
    tracker = spark.sparkContext.statusTracker()
    try:
        while thread.is_alive() and not stop.is_set():
            thread.join(0.5)
            if stop.is_set():
                break  # no progress report over the caller's "stopping"
            done_tasks, all_tasks = 0, 0
            for job_id in tracker.getJobIdsForGroup(group):
                job_info = tracker.getJobInfo(job_id)
                for stage_id in job_info.stageIds if job_info is not None else []:
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None:
                        done_tasks += stage.numCompletedTasks
                        all_tasks += stage.numTasks
            if all_tasks:
                notify(total * done_tasks // all_tasks, total, f"batches {done_tasks}/{all_tasks} done")
    finally:
        if thread.is_alive():
            spark.sparkContext.cancelJobGroup(group)
            thread.join(30)
            output.abandon()
    if stop.is_set():
        output.abandon()
        raise ExportInterrupted()
    if failure:
        output.abandon()
        raise failure[0]
    return outcome[0]


def _run_stream(spark: Any, plan: ExportPlan, notify: ProgressCallback, stop: threading.Event) -> ExportSummary:
    request, output = plan.request, plan.stream_output
    assert output is not None and request.checkpoint is not None
    started = time.monotonic()
    if request.overwrite:
        output.clear()
    removed = output.remove_orphans()
    notes = list(plan.notes)
    if removed:
        notes.append(f"removed {len(removed)} file(s) of a micro-batch that never committed (a killed run)")
    files_before, bytes_before = output.data_files_and_bytes()
    frame = spark.readStream.format("kfk").options(**plan.options).load()
    frame, partition_columns, schema_text = _prepare_frame(spark, plan, frame)
    if schema_text is not None and output.checkpoint_path is not None:
        output.checkpoint_path.mkdir(parents=True, exist_ok=True)
        (output.checkpoint_path / VALUE_SCHEMA_FILE).write_text(json.dumps({"value_schema": schema_text}),
                                                                encoding="utf-8")
    from pyspark.sql import functions as F

    frame = frame.observe("kfk-export", F.count(F.lit(1)).alias("rows"))
    writer = (frame.writeStream.format(request.output_format).option("path", request.output)
              .option("checkpointLocation", request.checkpoint).outputMode("append"))
    if request.output_format == "csv":
        writer = writer.option("header", "true")
    if partition_columns:
        writer = writer.partitionBy(*partition_columns)
    interval = _parse_trigger(request.trigger)
    writer = writer.trigger(availableNow=True) if interval is None else writer.trigger(processingTime=interval)
    run_starts = {r.topic_partition: r.from_offset for r in plan.ranges}
    latest = {r.topic_partition: r.until_offset for r in plan.ranges}
    if stop.is_set():
        raise ExportInterrupted()
    query = writer.start()
    seen: set[int] = set()
    rows = 0
    ends: dict[TopicPartition, int] = dict(run_starts)

    def account() -> None:
        nonlocal rows
        for report in query.recentProgress:
            if report.batchId in seen:
                continue
            seen.add(report.batchId)
            observed = (report.observedMetrics or {}).get("kfk-export")
            rows += int(observed["rows"] or 0) if observed is not None else 0
            for source in report.sources:
                for document, target in ((source.endOffset, ends), (source.latestOffset, latest)):
                    if isinstance(document, str) and document.strip().startswith("{"):
                        document = json.loads(document)
                    if isinstance(document, dict):
                        for tp, offset in offsets_from_document(document).items():
                            target[tp] = max(target.get(tp, offset), offset)

    try:
        while query.isActive and not stop.is_set():
            query.awaitTermination(0.5)
            account()
            total = sum(max(0, latest[tp] - run_starts.get(tp, latest[tp])) for tp in latest)
            done = sum(max(0, ends.get(tp, 0) - run_starts.get(tp, ends.get(tp, 0))) for tp in ends)
            notify(done, max(total, done), f"micro-batches {len(seen)}")
    finally:
        if query.isActive:
            query.stop()
            notes.append("stopped by the user; the next run with the same --checkpoint goes on from here")
    query.awaitTermination()
    account()
    output.remove_orphans()
    ranges = [OffsetRange(tp.topic, tp.partition, run_starts.get(tp, ends[tp]), ends[tp]) for tp in sorted(ends)]
    done = sum(offset_range.size for offset_range in ranges)
    notify(done, done, "done")
    files_after, bytes_after = output.data_files_and_bytes()
    return ExportSummary(rows, max(0, bytes_after - bytes_before), max(0, files_after - files_before), ranges,
                         time.monotonic() - started, request.output, notes)
