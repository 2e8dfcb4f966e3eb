"""`kfk spark-export`: topics to Parquet/JSON/CSV/ORC files through Spark, batch or streaming, exactly once.

Thin: the flags become an ExportRequest; kfk.spark.export plans it (topics, offsets and the output checked before
any JVM starts) and runs it; this module renders the progress and the summary. pyspark is an optional extra: when
it is missing the command says what to install, and a missing or old Java is reported before Spark tries to start.

Ctrl-C is one line and exit code 130 at any point (a streaming query that has started ends with its summary
instead: Ctrl-C is how one with an interval trigger ends), with Spark stopped: the export runs in a thread of its
own and this thread only waits, so that the interrupt never lands inside a call into the JVM (_interruptible).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Annotated, Optional, TypeVar

import typer

from kfk.commands.client_options import (
    DEFAULT_BOOTSTRAP_SERVER,
    CommandConfig,
    Debug,
    IsolationLevel,
    JsonOutput,
    client_errors,
    command_config_properties,
    console,
    parse_key_values,
    print_json,
    table,
)
from kfk.commands.errors import fail

app = typer.Typer()

_Summary = TypeVar("_Summary")


class OutputFormat(str, Enum):
    parquet = "parquet"
    json = "json"
    csv = "csv"
    orc = "orc"


@app.command("spark-export")
def spark_export(
    output: Annotated[str, typer.Option("--output", "-o", help="Directory (or, with --stream, any Spark URI) to "
                                                                 "write to.")],
    topic: Annotated[Optional[list[str]], typer.Option("--topic", "-t", help="A topic to export (repeatable).")] = None,
    pattern: Annotated[Optional[str], typer.Option("--pattern", help="Export every topic whose whole name matches "
                                                                     "this regex.")] = None,
    bootstrap_server: Annotated[Optional[str], typer.Option(
        "--bootstrap-server", envvar="KFK_BOOTSTRAP_SERVER", show_envvar=True,
        help=f"host:port of a broker (default {DEFAULT_BOOTSTRAP_SERVER} unless --log-dir).")] = None,
    command_config: CommandConfig = None,
    log_dir: Annotated[Optional[str], typer.Option(
        "--log-dir", help="Read a stopped broker's log dir(s) instead of a cluster (comma-separated).")] = None,
    output_format: Annotated[OutputFormat, typer.Option("--format", "-f", help="File format.")] = OutputFormat.parquet,
    starting_offsets: Annotated[Optional[str], typer.Option(
        "--starting-offsets", help='earliest (default), latest (--stream), JSON {"topic":{"0":42}} (-2 earliest, '
                                   '-1 latest), ts:<epoch ms|ISO time>, ts:<JSON of times>, or resume (batch: '
                                   'where the output ends).')] = None,
    ending_offsets: Annotated[Optional[str], typer.Option(
        "--ending-offsets", help="latest (default), JSON, or ts:... (batch only).")] = None,
    partition_by: Annotated[Optional[list[str]], typer.Option(
        "--partition-by", help="Columns to partition the files by, e.g. topic,partition or date (or hour), derived "
                               "from timestamp.")] = None,
    decode: Annotated[Optional[str], typer.Option(
        "--decode", help="key=binary|string,value=binary|string|json (JSON values become columns).")] = None,
    value_schema: Annotated[Optional[str], typer.Option(
        "--value-schema", help="The JSON values' schema as Spark DDL ('id BIGINT, name STRING'); default: "
                               "inferred from a sample.")] = None,
    value_format: Annotated[Optional[str], typer.Option(
        "--value-format", help="avro: values in Confluent's wire format, decoded to columns with the subject "
                               "<topic>-value's latest schema from --schema-registry-url (as --decode value=avro)."
    )] = None,
    schema_registry_url: Annotated[Optional[str], typer.Option(
        "--schema-registry-url", envvar="KFK_SCHEMA_REGISTRY_URL", show_envvar=True,
        help="The schema registry of --value-format avro (schema.registry.url).")] = None,
    include_headers: Annotated[bool, typer.Option("--include-headers", help="Export record headers too.")] = False,
    isolation_level: Annotated[IsolationLevel, typer.Option(
        "--isolation-level", help="read_committed (the default) skips aborted and open transactions; "
                                  "read_uncommitted exports every record.")
    ] = IsolationLevel.read_committed,
    min_partitions: Annotated[Optional[int], typer.Option(
        "--min-partitions", help="Split big offset ranges into at least this many Spark tasks.")] = None,
    max_offsets_per_trigger: Annotated[Optional[int], typer.Option(
        "--max-offsets-per-trigger", help="--stream: at most this many offsets per micro-batch.")] = None,
    fail_on_data_loss: Annotated[bool, typer.Option(
        "--fail-on-data-loss/--no-fail-on-data-loss", help="Fail when records to export were already deleted.")
    ] = True,
    master: Annotated[str, typer.Option("--master", help="Spark master URL (local[*], spark://host:7077, yarn, "
                                                         "k8s://...).")] = "local[*]",
    stream: Annotated[bool, typer.Option("--stream", help="Run as a Spark streaming query (needs --checkpoint).")
                      ] = False,
    checkpoint: Annotated[Optional[str], typer.Option(
        "--checkpoint", help="--stream: Spark's checkpoint dir; the same one resumes the export.")] = None,
    trigger: Annotated[str, typer.Option(
        "--trigger", help="--stream: available-now (export what is there, then stop) or an interval such as 30s "
                          "(run until Ctrl-C).")] = "available-now",
    spark_conf: Annotated[Optional[list[str]], typer.Option("--spark-conf", help="A Spark setting key=value "
                                                                                 "(repeatable).")] = None,
    option: Annotated[Optional[list[str]], typer.Option(
        "--option", help="A source option key=value, as for format('kafka') (repeatable), e.g. "
                         "kafka.fetch.max.bytes=10485760.")] = None,
    overwrite: Annotated[bool, typer.Option(
        "--overwrite", help="Replace what the output holds (and, with --stream, restart the checkpoint).")] = False,
    json_output: JsonOutput = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", help="Show Spark's own log (its warnings) and the full trace of a failure.")] = False,
    debug: Debug = False,
) -> None:
    """Export topics to files through Spark (PySpark and kfk's pure-Python Kafka source), exactly once."""
    with client_errors(debug), _interrupts_as_one_line():
        from kfk.spark.environment import SparkSetupError, check_java, check_pyspark

        try:
            check_pyspark()
        except SparkSetupError as error:
            fail(str(error))
        from kfk.spark.export import Decode, ExportRequest, plan_export

        if value_format is not None:
            if value_format != "avro":
                fail(f"--value-format {value_format}: spark-export decodes avro (or --decode for json and string)")
            if decode and "value=" in decode:
                fail("give --value-format avro or --decode value=..., not both")
            decode = f"{decode},value=avro" if decode else "value=avro"

        source_options = parse_key_values(option, "--option")
        # The client settings of --command-config (security.protocol, ssl.*) reach the source as kafka.* options,
        # as Spark's Kafka source takes them; an --option of the same name wins.
        for key, value in command_config_properties(command_config).items():
            source_options.setdefault(f"kafka.{key}", value)
        if include_headers:
            source_options["includeHeaders"] = "true"
        # Spark's Kafka source reads uncommitted by default; an export must never contain aborted records.
        source_options.setdefault("kafka.isolation.level", isolation_level.value)
        if min_partitions is not None:
            source_options["minPartitions"] = str(min_partitions)
        if max_offsets_per_trigger is not None:
            source_options["maxOffsetsPerTrigger"] = str(max_offsets_per_trigger)
        if not fail_on_data_loss:
            source_options["failOnDataLoss"] = "false"
        request = ExportRequest(
            output=output, log_dir=log_dir,
            bootstrap_servers=bootstrap_server or (None if log_dir else DEFAULT_BOOTSTRAP_SERVER),
            topics=list(topic or []), pattern=pattern, output_format=output_format.value,
            starting_offsets=starting_offsets, ending_offsets=ending_offsets,
            partition_by=[name.strip() for item in partition_by or [] for name in item.split(",") if name.strip()],
            decode=Decode.parse(decode), value_schema=value_schema,
            schema_registry_url=schema_registry_url or ("http://localhost:8081" if "avro" in (decode or "") else None),
            master=master, stream=stream,
            checkpoint=checkpoint, trigger=trigger, spark_conf=parse_key_values(spark_conf, "--spark-conf"),
            source_options=source_options, overwrite=overwrite, verbose=verbose)
        plan = plan_export(request)
        try:
            check_java()
        except SparkSetupError as error:
            fail(str(error))
        summary = _run(plan, quiet=json_output, verbose=verbose or debug)
        _print_summary(summary, plan, json_output)


@contextmanager
def _interrupts_as_one_line() -> Iterator[None]:
    """Ctrl-C before Spark starts, or a second one while the export stops (what it wrote by then is not known
    here): one line, and the exit code of a process that SIGINT ended."""
    try:
        yield
    except KeyboardInterrupt:
        fail("interrupted", 128 + signal.SIGINT)


def _run(plan, quiet: bool, verbose: bool):
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from kfk.spark.export import ExportInterrupted, run_export

    try:
        if quiet or not sys.stderr.isatty():
            return _spark_errors(lambda: _interruptible(lambda stop: run_export(plan, stop=stop)), verbose)
        progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                            TextColumn("{task.completed:,}/{task.total:,} offsets"),
                            TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=Console(stderr=True),
                            transient=False)
        with progress:
            task = progress.add_task("starting Spark", total=max(plan.total_offsets, 1),
                                     status=f"{plan.total_offsets:,} offsets planned in {len(plan.ranges)} "
                                            "partitions")

            def update(done: int, total: int, status: str) -> None:
                progress.update(task, description="exporting", completed=done, total=max(total, 1), status=status)

            def stopping() -> None:
                progress.update(task, description="stopping", status="Ctrl-C again to leave at once")

            return _spark_errors(lambda: _interruptible(lambda stop: run_export(plan, update, stop=stop), stopping),
                                 verbose)
    except ExportInterrupted:
        fail(f"interrupted; nothing of this run was written to {plan.request.output}", 128 + signal.SIGINT)


def _interruptible(export: Callable[[threading.Event], _Summary], on_stop: Callable[[], None] | None = None
                   ) -> _Summary:
    """Run `export` in a thread of its own while this thread, the main one, only waits; Ctrl-C sets the event that
    the export checks between its calls into the JVM (and calls `on_stop`); a second Ctrl-C leaves at once (Spark's
    JVM then ends when it sees this process gone).

    Python runs a signal handler in the main thread, between two bytecodes: a KeyboardInterrupt raised inside a
    py4j call broke it (py4j logged that with a traceback, about one Ctrl-C in five), and one raised while the
    session started left Spark's JVM running after kfk had exited. PySpark installs its own SIGINT handler (which
    cancels every job and raises KeyboardInterrupt) only when its SparkContext starts in the main thread: here it
    never does."""
    stop = threading.Event()
    results: list[_Summary] = []
    failures: list[BaseException] = []

    def run() -> None:
        try:
            results.append(export(stop))
        except BaseException as error:  # noqa: BLE001 - raised again in the main thread
            failures.append(error)

    def interrupt(signum: int, frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        if on_stop is not None:
            on_stop()

    thread = threading.Thread(target=run, name="kfk-spark-export-run", daemon=True)
    previous = signal.signal(signal.SIGINT, interrupt)
    try:
        thread.start()
        thread.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    if failures:
        raise failures[0]
    return results[0]


def _spark_errors(job, verbose: bool):
    """Spark's failures as one readable line: the root cause of the Java exception (or the kfk source's own error)
    and where Spark's own log is, not the JVM's stack; all of it with --verbose."""
    try:
        return job()
    except KeyboardInterrupt:
        raise
    except Exception as error:  # noqa: BLE001 - sorted below; kfk's own errors pass through
        from kfk.errors import KafkaError

        if verbose or isinstance(error, KafkaError):
            raise
        if type(error).__module__.startswith(("pyspark", "py4j")):
            from kfk.spark.environment import jvm_log_path

            fail(f"Spark job failed: {_root_cause(error)} (Spark's own log: {jvm_log_path()}; --verbose shows it "
                 "and the whole trace)")
        raise


def _root_cause(error: Exception) -> str:
    """The innermost cause of a Spark failure: a failure inside the kfk source carries its Python traceback, whose
    last `kfk.` line names it; otherwise the last exception of the Java cause chain, as `message (class)`."""
    text = str(error).strip()
    causes = [line.strip() for line in text.splitlines() if line.startswith("kfk.")]
    if causes:
        return causes[-1]
    java = getattr(error, "java_exception", None) or getattr(error, "_origin", None)
    if java is not None:
        try:
            while java.getCause() is not None and not java.getCause().equals(java):
                java = java.getCause()
            message = java.getMessage()
            name = java.getClass().getName()
            return f"{message} ({name})" if message else name
        except Exception:  # noqa: BLE001 - the JVM went away: the text below is all there is
            pass
    return next((line for line in text.splitlines() if line.strip()), type(error).__name__)[:500]


def _print_summary(summary, plan, json_output: bool) -> None:
    rows_by_partition = [{"topic": r.topic, "partition": r.partition, "from_offset": r.from_offset,
                          "until_offset": r.until_offset, "offsets": r.size} for r in summary.ranges]
    if json_output:
        print_json({"output": summary.output, "format": plan.request.output_format, "rows": summary.rows,
                    "bytes": summary.bytes, "files": summary.files, "seconds": round(summary.seconds, 3),
                    "partitions": rows_by_partition, "notes": summary.notes})
        return
    out = console()
    for note in summary.notes:
        out.print(f"note: {note}")
    grid = table("TOPIC", "PARTITION", "FROM-OFFSET", "UNTIL-OFFSET", "OFFSETS")
    for entry in rows_by_partition:
        grid.add_row(entry["topic"], str(entry["partition"]), str(entry["from_offset"]), str(entry["until_offset"]),
                     f"{entry['offsets']:,}")
    out.print(grid)
    out.print(f"exported {summary.rows:,} rows ({summary.bytes / 1e6:,.1f} MB in {summary.files} files) to "
              f"{summary.output} as {plan.request.output_format} in {summary.seconds:.1f} s{_rate(summary)}")


#: Below this a run's time is Spark's fixed costs (task start-up, the commit) more than moving rows: no rate.
MIN_SECONDS_FOR_A_RATE = 1.0


def _rate(summary) -> str:
    """The summary line's rate, " (N rows/s)", with two significant digits below 10 rows/s (a small export over a
    few seconds is 0.75 rows/s, not 0 or 1); nothing for an empty or sub-second run."""
    if summary.rows == 0 or summary.seconds < MIN_SECONDS_FOR_A_RATE:
        return ""
    rate = summary.rows / summary.seconds
    return f" ({rate:,.0f} rows/s)" if rate >= 10 else f" ({rate:.2g} rows/s)"
