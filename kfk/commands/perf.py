"""`kfk perf-test produce|consume`: kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh.

produce sends --num-records records of --record-size random bytes (or lines of --payload-file) as fast as allowed
(--throughput records/s, -1 for no limit), and prints Kafka's lines: every 5 s "N records sent, X records/sec
(Y MB/sec), A ms avg latency, M ms max latency.", and at the end the same with the 50th/95th/99th/99.9th latency
percentiles. Latency is from send() to the acknowledgement callback, as in Kafka's tool, in whole milliseconds.
--producer-props takes several key=value after one flag, as Kafka's does (``--producer-props acks=1 linger.ms=5``).
With --transactional-id (or --transaction-duration-ms) the records go in transactions, each committed once it
has been open --transaction-duration-ms (3000 by default). --print-metrics ends with Kafka's metrics table; kfk's
producer keeps no metrics registry, so it lists the producer-metrics the tool itself counts from the callbacks.
consume reads --messages records as a group member and prints Kafka's CSV summary (MB/s, records/s, rebalance
time, fetch time), or with --show-detailed-stats one such line per --reporting-interval instead. Both show a
progress bar on a terminal and take --json.
"""

from __future__ import annotations

import random
import sys
import time
from operator import itemgetter
from typing import Annotated, Any, Optional

import typer

from kfk.commands.client_options import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    ConsumerConfig,
    Debug,
    JsonOutput,
    ProducerConfig,
    client_config,
    check_reachable,
    client_errors,
    parse_key_values,
    print_json,
)
from kfk.commands.errors import fail

app = typer.Typer(help="Measure produce and consume throughput (kafka-*-perf-test.sh).", no_args_is_help=True)

MB = 1024 * 1024
DEFAULT_TRANSACTION_DURATION_MS = 3000
DEFAULT_TRANSACTIONAL_ID = "performance-producer-default-transactional-id"
#: Kafka's --date-format default (Java's yyyy-MM-dd HH:mm:ss:SSS).
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"


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
        self.max_size = 0

    @property
    def count(self) -> int:
        return len(self.latencies)

    def record(self, metadata, error) -> None:
        if error is not None:
            self.errors.append(error)
            return
        self.latencies.append(time.time_ns() // 1_000_000 - metadata.timestamp)
        self.bytes += metadata.serialized_value_size
        if metadata.serialized_value_size > self.max_size:
            self.max_size = metadata.serialized_value_size

    def record_run(self, metadata, count: int, error) -> None:
        """produce_batch's callback: ``count`` records of one batch, all sent at the first one's timestamp."""
        if error is not None:
            self.errors.append(error)
            return
        self.latencies += [time.time_ns() // 1_000_000 - metadata.timestamp] * count
        self.bytes += metadata.serialized_value_size * count
        if metadata.serialized_value_size > self.max_size:
            self.max_size = metadata.serialized_value_size

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

    def metrics(self, client_id: str) -> dict[str, float]:
        """The producer-metrics this run counted, under Kafka's metric names ("group:name:{tags}")."""
        elapsed = max(time.monotonic() - self.start, 1e-9)
        count, failed = len(self.latencies), len(self.errors)
        tags = f"{{client-id={client_id}}}"
        values = {"record-send-total": float(count), "record-send-rate": count / elapsed,
                  "record-error-total": float(failed), "record-error-rate": failed / elapsed,
                  "record-size-avg": self.bytes / count if count else 0.0, "record-size-max": float(self.max_size)}
        return {f"producer-metrics:{name}:{tags}": value for name, value in values.items()}


def print_metrics(metrics: dict[str, float]) -> None:
    """Kafka's ToolsUtils.printMetrics: a blank line, a header, then "name : value" sorted, values to 3 places."""
    width = max(map(len, metrics))
    typer.echo(f"\n{'Metric Name':<{width}}   Value")
    for name, value in sorted(metrics.items()):
        typer.echo(f"{name:<{width}} : {value:.3f}")


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
        "--producer-props", help="Producer configs key=value, several after one flag as in Kafka (--producer-props "
                                 "acks=1 linger.ms=5), or the flag repeated.")] = None,
    more_producer_props: Annotated[Optional[list[str]], typer.Argument(
        help="More key=value after --producer-props.", show_default=False)] = None,
    transactional_id: Annotated[Optional[str], typer.Option(
        "--transactional-id", help="Send in transactions with this transactional.id.")] = None,
    transaction_duration_ms: Annotated[Optional[int], typer.Option(
        "--transaction-duration-ms", help="Commit each transaction once it has been open this long (default "
                                          f"{DEFAULT_TRANSACTION_DURATION_MS}; enables transactions).")] = None,
    print_metrics_flag: Annotated[bool, typer.Option("--print-metrics", help="Print the producer metrics at the "
                                                                              "end.")] = False,
    producer_config: ProducerConfig = None,
    reporting_interval: Annotated[int, typer.Option("--reporting-interval", min=1, help="ms between lines.")
                                  ] = 5000,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    json_output: JsonOutput = False,
    debug: Debug = False,
) -> None:
    """Measure how fast records can be produced."""
    if (record_size is None) == (payload_file is None):
        fail("give exactly one of --record-size and --payload-file")
    if more_producer_props and not producer_props:
        fail(f"unexpected argument {more_producer_props[0]!r} (key=value settings go after --producer-props)")
    if transaction_duration_ms is not None and transaction_duration_ms <= 0:
        fail("--transaction-duration-ms should be greater than zero")
    payloads = _payloads(record_size, payload_file, payload_delimiter)
    props = parse_key_values([*(producer_props or []), *(more_producer_props or [])], "--producer-props")
    bootstrap = props.pop("bootstrap.servers", bootstrap_server)
    props.setdefault("client.id", "perf-producer-client")
    transactions = transactional_id is not None or transaction_duration_ms is not None
    if transactions:
        props["transactional.id"] = transactional_id or props.get("transactional.id", DEFAULT_TRANSACTIONAL_ID)
    transaction_duration = (transaction_duration_ms or DEFAULT_TRANSACTION_DURATION_MS) / 1000
    stats = ProduceStats(reporting_interval, periodic=not json_output)
    progress = _progress(num_records, "producing", sys.stderr.isatty() and not json_output)
    average_size = sum(map(len, payloads)) / len(payloads)
    with client_errors(debug):
        from kfk.client import Producer

        config = client_config(bootstrap, producer_config, props)
        check_reachable(config)
        with Producer(config) as producer:
            producer.partitions_for(topic)  # metadata (and auto-creation) before the clock starts
            if transactions:
                producer.init_transactions()
            stats.start = stats.window_start = time.monotonic()
            throttler = ThroughputThrottler(throughput, stats.start)
            throttled = throughput > 0
            send, callback, choice = producer.send, stats.record, random.Random(1).choice
            single = payloads[0] if len(payloads) == 1 else None
            transaction_start = None
            if single is not None and not throttled:
                # One payload, no rate limit: produce_batch, a chunk of about a batch's worth of records per call
                # (one sticky partition per call) and one callback per batch.
                chunk = max(1, min(1000, producer.config.batch_size // max(len(single), 1)))
                chunk_payloads = [single] * chunk
                sent = 0
                while sent < num_records and not stats.errors:
                    if transactions and transaction_start is None:
                        producer.begin_transaction()
                        transaction_start = time.monotonic()
                    count = min(chunk, num_records - sent)
                    producer.produce_batch(topic, chunk_payloads if count == chunk else [single] * count,
                                           callback=stats.record_run)
                    sent += count
                    if transaction_start is not None and time.monotonic() - transaction_start >= \
                            transaction_duration:
                        producer.commit_transaction()
                        transaction_start = None
                    stats.maybe_print_window(average_size)
                    if progress is not None:
                        progress.update(progress.task_ids[0], completed=stats.count)
            else:
                for index in range(num_records):
                    if transactions and transaction_start is None:
                        producer.begin_transaction()
                        transaction_start = time.monotonic()
                    send(topic, single if single is not None else choice(payloads), callback=callback)
                    if transaction_start is not None and time.monotonic() - transaction_start >= transaction_duration:
                        producer.commit_transaction()
                        transaction_start = None
                    if throttled:
                        throttler.throttle(index + 1)
                    if index % 1000 == 0:
                        stats.maybe_print_window(average_size)
                        if progress is not None:
                            progress.update(progress.task_ids[0], completed=stats.count)
                        if stats.errors:
                            break
            if transaction_start is not None and not stats.errors:
                producer.commit_transaction()
            producer.flush()
        if progress is not None:
            progress.stop()
        if stats.errors:
            raise stats.errors[0]
    result = stats.summary()
    if json_output:
        print_json(result | ({"metrics": stats.metrics(props["client.id"])} if print_metrics_flag else {}))
        return
    typer.echo(f"{result['records']} records sent, {result['records_per_sec']:f} records/sec "
               f"({result['mb_per_sec']:.2f} MB/sec), {result['avg_latency_ms']:.2f} ms avg latency, "
               f"{result['max_latency_ms']:.2f} ms max latency, {result['p50_ms']} ms 50th, {result['p95_ms']} ms "
               f"95th, {result['p99_ms']} ms 99th, {result['p999_ms']} ms 99.9th.")
    if print_metrics_flag:
        print_metrics(stats.metrics(props["client.id"]))


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
    consumer_config: ConsumerConfig = None,
    show_detailed_stats: Annotated[bool, typer.Option(
        "--show-detailed-stats", help="A line per --reporting-interval instead of the one summary.")] = False,
    reporting_interval: Annotated[int, typer.Option("--reporting-interval", min=1,
                                                    help="ms between --show-detailed-stats lines.")] = 5000,
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
    detailed = show_detailed_stats and not json_output
    if detailed:
        typer.echo(f"time, threadId, {CONSUME_FIELDS}")
    with client_errors(debug):
        from kfk.client import Consumer

        config = client_config(bootstrap_server, consumer_config, props)
        check_reachable(config)
        with Consumer(config) as consumer:
            start = time.monotonic()
            pending = _join(consumer, topic, messages, timeout)
            joined = time.monotonic()
            last_record = joined
            window = _Window(start, joined - start)
            while count < messages:
                # The batch API, as a confluent-kafka user consumes: every record buffered, up to what is left.
                batch = pending.as_list() if pending is not None else consumer.consume(messages - count, 0.5)
                pending = None
                if not batch:
                    if (time.monotonic() - last_record) * 1000 > timeout:
                        typer.echo(f"WARNING: exiting before consuming the expected number of messages: timeout "
                                   f"({timeout} ms) exceeded.", err=True)
                        break
                    continue
                last_record = time.monotonic()
                count += len(batch)
                size += _record_bytes(batch)
                if detailed and (last_record - window.start) * 1000 >= reporting_interval:
                    window.report(last_record, count, size)
                if progress is not None:
                    progress.update(progress.task_ids[0], completed=count)
            end = time.monotonic()
        if progress is not None:
            progress.stop()
    result = _consume_result(start, joined, end, count, size)
    if json_output:
        print_json(result)
        return
    if detailed:
        return
    typer.echo(f"start.time, end.time, {CONSUME_FIELDS}")
    typer.echo(f"{result['start_time']}, {result['end_time']}, {result['data_consumed_mb']:.4f}, "
               f"{result['mb_per_sec']:.4f}, {count}, {result['records_per_sec']:.4f}, "
               f"{result['rebalance_time_ms']}, {result['fetch_time_ms']}, {result['fetch_mb_per_sec']:.4f}, "
               f"{result['fetch_records_per_sec']:.4f}")


CONSUME_FIELDS = ("data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, "
                  "fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def _date(moment: float) -> str:
    """A wall-clock time in Kafka's default --date-format, yyyy-MM-dd HH:mm:ss:SSS."""
    return time.strftime(DATE_FORMAT, time.localtime(moment)) + f":{int(moment * 1000) % 1000:03d}"


class _Window:
    """kafka-consumer-perf-test.sh --show-detailed-stats: one line per reporting interval with the totals so
    far and the interval's rates (its fetch time is the interval minus the time spent joining the group)."""

    def __init__(self, start: float, join_time: float) -> None:
        self.start = start
        self.join_time = join_time
        self.count = self.size = 0

    def report(self, now: float, count: int, size: int) -> None:
        elapsed = now - self.start
        fetch_time = elapsed - self.join_time
        interval_mb, interval_count = (size - self.size) / MB, count - self.count
        fetch_rates = (interval_mb / fetch_time, interval_count / fetch_time) if fetch_time > 0 else (0.0, 0.0)
        typer.echo(f"{_date(time.time())}, 0, {size / MB:.4f}, {interval_mb / elapsed:.4f}, {count}, "
                   f"{interval_count / elapsed:.4f}, {int(self.join_time * 1000)}, {int(fetch_time * 1000)}, "
                   f"{fetch_rates[0]:.4f}, {fetch_rates[1]:.4f}")
        self.start, self.join_time, self.count, self.size = now, 0.0, count, size


_KEY, _VALUE = itemgetter(5), itemgetter(6)  # a ConsumerRecord's key and value


def _record_bytes(records: list) -> int:
    """The key and value bytes of ``records``, as kafka-consumer-perf-test.sh counts them (None counts 0), summed by
    map/filter rather than a Python expression per record (273 against 461 ns a record, measured), so that the
    tool's own counting weighs little on the client's figure."""
    return sum(map(len, filter(None, map(_KEY, records)))) + sum(map(len, filter(None, map(_VALUE, records))))


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
        "start_time": _date(time.time() - elapsed), "end_time": _date(time.time()),
        "data_consumed_mb": size / MB, "mb_per_sec": size / MB / elapsed if elapsed else 0.0,
        "records": count, "records_per_sec": count / elapsed if elapsed else 0.0,
        "rebalance_time_ms": int((joined - start) * 1000), "fetch_time_ms": int(fetch_time * 1000),
        "fetch_mb_per_sec": size / MB / fetch_time if fetch_time else 0.0,
        "fetch_records_per_sec": count / fetch_time if fetch_time else 0.0,
    }
