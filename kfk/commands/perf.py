"""`kfk perf-test produce|consume`: kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh.

produce sends --num-records records of --record-size random bytes (or lines of --payload-file) as fast as allowed
(--throughput records/s, -1 for no limit), and prints Kafka's lines: every 5 s "N records sent, X records/sec
(Y MB/sec), A ms avg latency, M ms max latency.", and at the end the same with the 50th/95th/99th/99.9th latency
percentiles. Latency is from send() to the acknowledgement callback, as in Kafka's tool, in whole milliseconds. consume reads --messages records as a group member and prints Kafka's CSV
summary (MB/s, records/s, rebalance time, fetch time). Both show a progress bar on a terminal and take --json.
"""

from __future__ import annotations

import random
import sys
import time
from typing import Annotated, Any, Optional

import typer

from kfk.commands.client_options import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    Debug,
    JsonOutput,
    client_config,
    check_reachable,
    client_errors,
    parse_key_values,
    print_json,
)
from kfk.commands.errors import fail

app = typer.Typer(help="Measure produce and consume throughput (kafka-*-perf-test.sh).", no_args_is_help=True)

MB = 1024 * 1024


class ProduceStats:
    """Kafka's ProducerPerformance.Stats, shaped for Python: one bound method is every record's callback (no
    closure per record), and the latency comes from the record's own timestamp, which send() set to the send time.
    Only the producer's network thread runs the callback, so appending to lists needs no lock; the caller's thread
    reads them for the periodic line."""

    def __init__(self, reporting_interval_ms: int, periodic: bool) -> None:
        self.start = time.monotonic()
        self.latencies: list[int] = []
        self.bytes = 0
        self.window_start = self.start
        self.window_first = 0
        self.reporting_interval = reporting_interval_ms / 1000
        self.periodic = periodic
        self.errors: list[BaseException] = []

    @property
    def count(self) -> int:
        return len(self.latencies)

    def record(self, metadata, error) -> None:
        if error is not None:
            self.errors.append(error)
            return
        self.latencies.append(time.time_ns() // 1_000_000 - metadata.timestamp)
        self.bytes += metadata.serialized_value_size

    def maybe_print_window(self, record_size: float) -> None:
        now = time.monotonic()
        if not self.periodic or now - self.window_start < self.reporting_interval:
            return
        window = self.latencies[self.window_first:]
        elapsed = now - self.window_start
        self.window_start, self.window_first = now, self.window_first + len(window)
        count = len(window)
        average = sum(window) / count if count else 0.0
        typer.echo(f"{count} records sent, {count / elapsed:.1f} records/sec "
                   f"({count * record_size / MB / elapsed:.2f} MB/sec), {average:.1f} ms avg latency, "
                   f"{max(window, default=0):.1f} ms max latency.")

    def summary(self) -> dict[str, Any]:
        elapsed = time.monotonic() - self.start
        latencies = sorted(self.latencies)
        count = len(latencies)

        def percentile(fraction: float) -> int:
            return latencies[min(int(count * fraction), count - 1)] if latencies else 0

        return {
            "records": count, "elapsed_s": round(elapsed, 3),
            "records_per_sec": count / elapsed if elapsed else 0.0,
            "mb_per_sec": self.bytes / MB / elapsed if elapsed else 0.0,
            "avg_latency_ms": sum(latencies) / count if count else 0.0,
            "max_latency_ms": latencies[-1] if latencies else 0,
            "p50_ms": percentile(0.5), "p95_ms": percentile(0.95), "p99_ms": percentile(0.99),
            "p999_ms": percentile(0.999),
        }


class ThroughputThrottler:
    """Kafka's ThroughputThrottler: sleep whenever the sends so far run ahead of the target rate."""

    def __init__(self, target_per_sec: float, start: float) -> None:
        self.target = target_per_sec
        self.start = start

    def throttle(self, sent: int) -> None:
        if self.target <= 0:
            return
        ahead = sent / self.target - (time.monotonic() - self.start)
        if ahead > 0:
            time.sleep(ahead)


def _payloads(record_size: int | None, payload_file: str | None, delimiter: str) -> list[bytes]:
    if payload_file is not None:
        try:
            with open(payload_file, "rb") as handle:
                text = handle.read()
        except OSError as error:
            fail(f"cannot read {payload_file}: {error.strerror or error}")
        payloads = [part for part in text.split(delimiter.encode().decode("unicode_escape").encode()) if part]
        if not payloads:
            fail(f"{payload_file} holds no payloads")
        return payloads
    assert record_size is not None
    rng = random.Random(0)
    return [bytes(rng.randrange(65, 91) for _ in range(record_size))]  # Kafka's perf payload: random A-Z


def _progress(total: int, description: str, enabled: bool):
    if not enabled:
        return None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    from rich.console import Console

    progress = Progress(TextColumn(description), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                        console=Console(stderr=True), transient=True)
    progress.start()
    progress.add_task(description, total=total)
    return progress


@app.command()
def produce(
    topic: Annotated[str, typer.Option("--topic", help="The topic to produce to.")],
    num_records: Annotated[int, typer.Option("--num-records", min=1, help="How many records to send.")],
    record_size: Annotated[Optional[int], typer.Option("--record-size", min=0, help="Bytes per record.")] = None,
    payload_file: Annotated[Optional[str], typer.Option(
        "--payload-file", help="Send the file's payloads (split at --payload-delimiter) at random instead.")] = None,
    payload_delimiter: Annotated[str, typer.Option("--payload-delimiter", help="Separator in --payload-file.")
                                 ] = "\\n",
    throughput: Annotated[float, typer.Option("--throughput", help="Records per second at most; -1: no limit.")
                          ] = -1,
    producer_props: Annotated[Optional[list[str]], typer.Option(
        "--producer-props", help="Producer configs key=value (repeatable, e.g. acks=1 linger.ms=5).")] = None,
    producer_config: Annotated[Optional[str], typer.Option("--producer.config", "--producer-config",
                                                           help="A producer properties file.")] = None,
    reporting_interval: Annotated[int, typer.Option("--reporting-interval", min=1, help="ms between lines.")
                                  ] = 5000,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    json_output: JsonOutput = False,
    debug: Debug = False,
) -> None:
    """Measure how fast records can be produced."""
    if (record_size is None) == (payload_file is None):
        fail("give exactly one of --record-size and --payload-file")
    payloads = _payloads(record_size, payload_file, payload_delimiter)
    props = parse_key_values(producer_props, "--producer-props")
    bootstrap = props.pop("bootstrap.servers", bootstrap_server)
    stats = ProduceStats(reporting_interval, periodic=not json_output)
    progress = _progress(num_records, "producing", sys.stderr.isatty() and not json_output)
    average_size = sum(map(len, payloads)) / len(payloads)
    with client_errors(debug):
        from kfk.client import Producer

        config = client_config(bootstrap, producer_config, props)
        check_reachable(config)
        with Producer(config) as producer:
            producer.partitions_for(topic)  # metadata (and auto-creation) before the clock starts
            stats.start = stats.window_start = time.monotonic()
            throttler = ThroughputThrottler(throughput, stats.start)
            throttled = throughput > 0
            send, callback, choice = producer.send, stats.record, random.Random(1).choice
            single = payloads[0] if len(payloads) == 1 else None
            for index in range(num_records):
                send(topic, single if single is not None else choice(payloads), callback=callback)
                if throttled:
                    throttler.throttle(index + 1)
                if index % 1000 == 0:
                    stats.maybe_print_window(average_size)
                    if progress is not None:
                        progress.update(progress.task_ids[0], completed=stats.count)
                    if stats.errors:
                        break
            producer.flush()
        if progress is not None:
            progress.stop()
        if stats.errors:
            raise stats.errors[0]
    result = stats.summary()
    if json_output:
        print_json(result)
        return
    typer.echo(f"{result['records']} records sent, {result['records_per_sec']:f} records/sec "
               f"({result['mb_per_sec']:.2f} MB/sec), {result['avg_latency_ms']:.2f} ms avg latency, "
               f"{result['max_latency_ms']:.2f} ms max latency, {result['p50_ms']} ms 50th, {result['p95_ms']} ms "
               f"95th, {result['p99_ms']} ms 99th, {result['p999_ms']} ms 99.9th.")


@app.command()
def consume(
    topic: Annotated[str, typer.Option("--topic", help="The topic to consume.")],
    messages: Annotated[int, typer.Option("--messages", min=1, help="How many records to read.")],
    group: Annotated[Optional[str], typer.Option("--group", help="The consumer group (default: a new one).")] = None,
    from_latest: Annotated[bool, typer.Option("--from-latest", help="Start at the end instead of the beginning.")
                           ] = False,
    timeout: Annotated[int, typer.Option("--timeout", min=1, help="Give up after this many ms without records.")
                       ] = 10_000,
    consumer_props: Annotated[Optional[list[str]], typer.Option(
        "--consumer-props", help="Consumer configs key=value (repeatable).")] = None,
    consumer_config: Annotated[Optional[str], typer.Option("--consumer.config", "--consumer-config",
                                                           help="A consumer properties file.")] = None,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    json_output: JsonOutput = False,
    debug: Debug = False,
) -> None:
    """Measure how fast records can be consumed."""
    props: dict[str, Any] = {"group.id": group or f"perf-consumer-{random.randrange(100_000)}",
                             "auto.offset.reset": "latest" if from_latest else "earliest",
                             "enable.auto.commit": False}
    props.update(parse_key_values(consumer_props, "--consumer-props"))
    progress = _progress(messages, "consuming", sys.stderr.isatty() and not json_output)
    count = size = 0
    with client_errors(debug):
        from kfk.client import Consumer

        with Consumer(client_config(bootstrap_server, consumer_config, props)) as consumer:
            start = time.monotonic()
            pending = _join(consumer, topic, messages, timeout)
            joined = time.monotonic()
            last_record = joined
            while count < messages:
                records = pending if pending is not None else consumer.poll(0.5, max_records=messages - count)
                pending = None
                if not records:
                    if (time.monotonic() - last_record) * 1000 > timeout:
                        typer.echo(f"WARNING: exiting before consuming the expected number of messages: timeout "
                                   f"({timeout} ms) exceeded.", err=True)
                        break
                    continue
                last_record = time.monotonic()
                for record in records:
                    count += 1
                    size += len(record.value or b"") + len(record.key or b"")
                if progress is not None:
                    progress.update(progress.task_ids[0], completed=count)
            end = time.monotonic()
        if progress is not None:
            progress.stop()
    result = _consume_result(start, joined, end, count, size)
    if json_output:
        print_json(result)
        return
    typer.echo("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
               "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
    typer.echo(f"{result['start_time']}, {result['end_time']}, {result['data_consumed_mb']:.4f}, "
               f"{result['mb_per_sec']:.4f}, {count}, {result['records_per_sec']:.4f}, "
               f"{result['rebalance_time_ms']}, {result['fetch_time_ms']}, {result['fetch_mb_per_sec']:.4f}, "
               f"{result['fetch_records_per_sec']:.4f}")


def _join(consumer, topic: str, messages: int, timeout: int):
    """Subscribe and poll until partitions are assigned; returns what the poll that completed the join brought
    (it may already hold records)."""
    start = time.monotonic()
    consumer.subscribe([topic])
    pending = None
    while not consumer.assignment():
        pending = consumer.poll(0.1, max_records=messages)
        if time.monotonic() - start > timeout / 1000:
            fail(f"no partitions of {topic!r} were assigned within {timeout} ms")
    return pending


def _consume_result(start: float, joined: float, end: float, count: int, size: int) -> dict[str, Any]:
    """kafka-consumer-perf-test.sh's figures: the whole run, and the fetch time after the group join."""
    elapsed = end - start
    fetch_time = end - joined
    return {
        "start_time": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - elapsed)),
        "end_time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "data_consumed_mb": size / MB, "mb_per_sec": size / MB / elapsed if elapsed else 0.0,
        "records": count, "records_per_sec": count / elapsed if elapsed else 0.0,
        "rebalance_time_ms": int((joined - start) * 1000), "fetch_time_ms": int(fetch_time * 1000),
        "fetch_mb_per_sec": size / MB / fetch_time if fetch_time else 0.0,
        "fetch_records_per_sec": count / fetch_time if fetch_time else 0.0,
    }
