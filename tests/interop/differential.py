"""Apache Kafka as the oracle: the same requests to Apache Kafka and to kfk, the decoded responses compared.

A scenario (tests/interop/scenarios.py) is a function of one broker session and one API version; it sends requests
with kfk's own codec (kfk.protocol: the sans-I/O ClientConnection over a blocking socket) and may build the next
request from an answer (a member id, a generation), so it runs against each broker on its own and the two
recordings are compared exchange by exchange. Before comparing, what must differ between two brokers is
normalised: cluster ids, hosts and ports, throttle times, broker clocks and disk sizes, ids the broker generates
(topic ids, producer ids, member ids: numbered in their order of appearance within one answer, so "the same member"
still compares), free-text error messages (only whether there is one: kfk words its own), and the run's unique
suffix in names. Lists of named items (topics, partitions, configs, groups) are compared by name, not by
position: their order is unspecified in Kafka's protocol.

The outcome is a table API x version: identical, differs (with the field paths), not exercised, or advertised by
one broker only. `python bench/differential_report.py` starts both brokers and prints it.
"""

from __future__ import annotations

import re
import socket
import struct
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kfk.protocol.connection import ClientConnection, Response, StreamError
from kfk.protocol.message import Message
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.api_versions import ApiVersionsRequest

#: What the recording holds when the broker closed the connection instead of answering (Kafka's answer to a request
#: it cannot parse, e.g. a version it does not serve).
CONNECTION_CLOSED = "<connection closed>"
#: A broker's ApiVersions table: api key -> (lowest, highest version).
VersionTable = dict[int, tuple[int, int]]


@dataclass
class Exchange:
    """One request and its answer as recorded: `response` is the decoded body as plain data, or CONNECTION_CLOSED."""

    label: str
    api_key: int
    version: int
    response: Any


class BrokerSession:
    """A blocking connection to one broker, speaking through kfk's sans-I/O ClientConnection, recording every exchange.

    `suffix` makes the scenario's topic and group names unique to the run; the same suffix is used on both brokers,
    so the names compare equal."""

    def __init__(self, bootstrap: str, suffix: str, *, timeout: float = 30.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.address = (host, int(port))
        self.suffix = suffix
        self.timeout = timeout
        self.exchanges: list[Exchange] = []
        self._socket: socket.socket | None = None
        self._connection: ClientConnection[None] | None = None

    def name(self, base: str) -> str:
        """A topic or group name unique to this run."""
        return f"{base}-{self.suffix}"

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
        self._socket = self._connection = None

    def __enter__(self) -> BrokerSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connect(self) -> tuple[socket.socket, ClientConnection[None]]:
        if self._socket is None or self._connection is None:
            self._socket = socket.create_connection(self.address, timeout=self.timeout)
            self._connection = ClientConnection("kfk-differential")
        return self._socket, self._connection

    def call(self, request: Message, version: int, label: str = "", *, record: bool = True) -> Message | None:
        """Send `request` at `version` and record the answer (unless `record` is false: a wait, whose number of
        polls differs between brokers); None (recorded as CONNECTION_CLOSED) if the broker closed the connection
        instead. The next call reconnects."""
        sock, connection = self._connect()
        return self._exchange(sock, connection, connection.send_request(request, version, None),
                              request.API_KEY, version, label if record else None)

    def call_frame(self, frame: bytes, api_key: int, version: int, label: str) -> Message | None:
        """Send a hand-built request frame (a version the codec cannot encode), its correlation id replaced by the
        connection's next one, and register it in the connection's FIFO as `api_key` at `version`: what
        ClientConnection needs to decode the answer (e.g. KIP-511's v0 fallback)."""
        sock, connection = self._connect()
        connection.send_request(ApiVersionsRequest(), 0, None)  # only to take the next correlation id
        pending = connection.in_flight.pop()
        connection.in_flight.append(pending._replace(api_key=api_key, api_version=version))
        frame = frame[:8] + struct.pack(">i", pending.correlation_id) + frame[12:]
        return self._exchange(sock, connection, frame, api_key, version, label)

    def _exchange(self, sock: socket.socket, connection: ClientConnection[None], frame: bytes, api_key: int,
                  version: int, label: str | None) -> Message | None:
        try:
            sock.sendall(frame)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed by the broker: the read below sees it
        while True:
            try:
                data = sock.recv(1 << 20)
            except ConnectionResetError:
                data = b""
            if not data:
                self.close()
                if label is not None:
                    self.exchanges.append(Exchange(label, api_key, version, CONNECTION_CLOSED))
                return None
            events = connection.receive_data(data)
            if events:
                break
        (event,) = events
        if isinstance(event, StreamError):
            raise event.error
        assert isinstance(event, Response)
        if label is not None:
            self.exchanges.append(Exchange(label, api_key, version, event.message.to_dict()))
        return event.message


def advertised_versions(bootstrap: str) -> VersionTable:
    """The broker's ApiVersions table: api key -> (min, max)."""
    with BrokerSession(bootstrap, "") as session:
        response = session.call(ApiVersionsRequest(client_software_name="kfk-differential",
                                                   client_software_version="1"), 3)
    assert response is not None and response.error_code == 0
    return {key.api_key: (key.min_version, key.max_version) for key in response.api_keys}


def common_versions(kafka: VersionTable, kfk: VersionTable) -> VersionTable:
    """Per API, the versions both brokers advertise."""
    common: VersionTable = {}
    for api_key in kafka.keys() & kfk.keys():
        lowest = max(kafka[api_key][0], kfk[api_key][0])
        highest = min(kafka[api_key][1], kfk[api_key][1])
        if lowest <= highest:
            common[api_key] = (lowest, highest)
    return common


# --- normalising --------------------------------------------------------------------------------------------------

#: Fields whose values are the broker's own and never compare: where it runs, its clock, its throttling.
_IGNORED_FIELDS = frozenset({
    "cluster_id", "host", "port", "throttle_time_ms", "log_dir", "log_append_time_ms", "transaction_start_time_ms",
    "last_timestamp", "current_state_timestamp", "high_watermark_update_time_ms", "last_fetch_timestamp",
    "last_caught_up_timestamp", "total_bytes", "usable_bytes", "size",
})
#: Fields holding ids the broker generates: compared by order of first appearance, their "none" values kept.
_GENERATED_IDS: dict[str, tuple[str, object]] = {
    "topic_id": ("topic_id", uuid.UUID(int=0)),
    "producer_id": ("producer_id", -1),
    "member_id": ("member_id", ""),
    "leader": ("member_id", ""),
    "client_host": ("client_host", ""),
    "finalized_features_epoch": ("finalized_features_epoch", -1),  # the offset of the last feature record
}
#: A list of structs is keyed by the first of these fields its items all carry with distinct values.
_LIST_KEYS = ("name", "topic", "topic_name", "partition_index", "partition", "index", "api_key", "resource_name",
              "group_id", "key", "transactional_id", "member_id")
#: Free text: kfk words its own messages (the project copies no prose of Apache Kafka's), so only whether there is
#: one compares.
_FREE_TEXT_FIELDS = frozenset({"error_message", "batch_index_error_message"})


#: Fields that hold one broker's history in one API's answers: DescribeQuorum's metadata log (its length and epoch
#: count what each broker has done since it was formatted).
_IGNORED_PER_API: dict[int, frozenset[str]] = {
    ApiKey.DESCRIBE_QUORUM: frozenset({"leader_epoch", "high_watermark", "log_end_offset"}),
}


class Normaliser:
    """Turns one broker's decoded responses into data comparable with the other broker's (see the module doc)."""

    def __init__(self, suffix: str, api_key: int = -1) -> None:
        self.suffix = suffix
        self._ids: dict[str, dict[object, str]] = {}
        self._ignored = _IGNORED_FIELDS | _IGNORED_PER_API.get(api_key, frozenset())

    def __call__(self, value: Any, field_name: str = "") -> Any:
        if field_name in self._ignored:
            return "<ignored>"
        if field_name in _FREE_TEXT_FIELDS:
            return "<text>" if value else value
        if field_name in _GENERATED_IDS:
            kind, none = _GENERATED_IDS[field_name]
            if value == none or not isinstance(value, (str, int, uuid.UUID)):
                return value
            seen = self._ids.setdefault(kind, {})
            return seen.setdefault(value, f"<{kind} #{len(seen) + 1}>")
        if isinstance(value, dict):
            return {name: self(item, name) for name, item in value.items()}
        if isinstance(value, list):
            key = _list_key(value)
            if key is not None and key not in _GENERATED_IDS:
                # In the order of their keys: the numbers given to generated ids must not follow the broker's order.
                value = sorted(value, key=lambda item: repr(item[key]))
            items = [self(item, field_name) for item in value]
            return {f"{key}={item[key]}": item for item in items} if key else items
        if isinstance(value, str) and self.suffix:
            return value.replace(self.suffix, "<run>")
        return value


def _list_key(items: list) -> str | None:
    if not items or not all(isinstance(item, dict) for item in items):
        return None
    for key in _LIST_KEYS:
        values = [item.get(key, _MISSING) for item in items]
        if _MISSING not in values and len(set(map(repr, values))) == len(values):
            return key
    return None


_MISSING = object()
#: A keyed list item whose key holds the run's suffix, in a difference's path.
_RUN_ITEM = re.compile(r"\[[a-z_]+=[^\]]*<run>[^\]]*\]")


def differences(kafka: Any, kfk: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """The (field path, Kafka's value, kfk's value) where two normalised responses differ. A path names struct
    fields with dots and keyed list items as [key=value]; positional lists as [i]."""
    if isinstance(kafka, dict) and isinstance(kfk, dict):
        keyed = any(name.count("=") == 1 for name in kafka.keys() | kfk.keys())
        found = []
        for name in sorted(kafka.keys() | kfk.keys(), key=str):
            sub = f"{path}[{name}]" if keyed else (f"{path}.{name}" if path else name)
            found += differences(kafka.get(name, "<absent>"), kfk.get(name, "<absent>"), sub)
        return found
    if isinstance(kafka, list) and isinstance(kfk, list) and len(kafka) == len(kfk):
        return [diff for index, (a, b) in enumerate(zip(kafka, kfk)) for diff in differences(a, b, f"{path}[{index}]")]
    return [] if kafka == kfk else [(path, kafka, kfk)]


# --- comparing two runs ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Difference:
    api_key: int
    version: int
    label: str
    path: str
    kafka: Any
    kfk: Any

    @property
    def key(self) -> tuple[str, int, str]:
        """(API name, version, field path): how a list of expected differences names one. The items a scenario
        named (topics, groups: their names hold the run's suffix) are written [] in the path, so that one entry
        covers every scenario's topic; items of fixed names (configs, features) keep them."""
        return ApiKey(self.api_key).name, self.version, _RUN_ITEM.sub("[]", self.path)


@dataclass
class Comparison:
    kafka_versions: VersionTable
    kfk_versions: VersionTable
    exercised: set[tuple[int, int]] = field(default_factory=set)
    differences: list[Difference] = field(default_factory=list)

    def table(self, documented: Callable[[Difference], bool] = lambda _: False) -> list[tuple[str, int, str]]:
        """(API name, version, status) for every version either broker advertises."""
        rows = []
        for api_key in sorted(self.kafka_versions.keys() | self.kfk_versions.keys()):
            versions = set()
            for table in (self.kafka_versions, self.kfk_versions):
                if api_key in table:
                    versions.update(range(table[api_key][0], table[api_key][1] + 1))
            for version in sorted(versions):
                rows.append((ApiKey(api_key).name, version, self._status(api_key, version, documented)))
        return rows

    def _status(self, api_key: int, version: int, documented: Callable[[Difference], bool]) -> str:
        in_kafka = _advertises(self.kafka_versions, api_key, version)
        in_kfk = _advertises(self.kfk_versions, api_key, version)
        if not in_kfk:
            return "Kafka-only"
        if not in_kafka:
            return "kfk-only"
        if (api_key, version) not in self.exercised:
            return "not exercised"
        found = [d for d in self.differences if (d.api_key, d.version) == (api_key, version)]
        if not found:
            return "identical"
        paths = sorted({d.path or "(the whole answer)" for d in found})
        kind = "differs (documented)" if all(map(documented, found)) else "differs"
        return f"{kind}: {', '.join(paths[:4])}{' ...' if len(paths) > 4 else ''}"

    def render(self, documented: Callable[[Difference], bool] = lambda _: False) -> str:
        rows = self.table(documented)
        counts: dict[str, int] = {}
        for _, _, status in rows:
            kind = status.split(":")[0]
            counts[kind] = counts.get(kind, 0) + 1
        width = max(len(name) for name, _, _ in rows)
        lines = [f"{'API':<{width}}  ver  status", f"{'-' * width}  ---  ------"]
        lines += [f"{name:<{width}}  {version:>3}  {status}" for name, version, status in rows]
        lines.append("")
        lines.append("totals: " + ", ".join(f"{kind} {count}" for kind, count in sorted(counts.items())))
        return "\n".join(lines)


def _advertises(table: VersionTable, api_key: int, version: int) -> bool:
    return api_key in table and table[api_key][0] <= version <= table[api_key][1]


def compare(kafka_exchanges: list[Exchange], kfk_exchanges: list[Exchange], suffix: str,
            kafka_versions: VersionTable, kfk_versions: VersionTable) -> Comparison:
    """Pair the two recordings exchange by exchange and list every difference after normalising."""
    comparison = Comparison(kafka_versions, kfk_versions)
    for kafka, kfk in zip(kafka_exchanges, kfk_exchanges, strict=True):
        # Generated ids are numbered per exchange, so that one difference does not shift every later number.
        normalise_kafka, normalise_kfk = Normaliser(suffix, kafka.api_key), Normaliser(suffix, kafka.api_key)
        assert (kafka.label, kafka.api_key, kafka.version) == (kfk.label, kfk.api_key, kfk.version), \
            f"the scenarios diverged: {kafka.label} vs {kfk.label}"
        comparison.exercised.add((kafka.api_key, kafka.version))
        kafka_response, kfk_response = normalise_kafka(kafka.response), normalise_kfk(kfk.response)
        if kafka.api_key == ApiKey.API_VERSIONS:
            _version_table_apart(kafka_response, kfk_response)
        for path, a, b in differences(kafka_response, kfk_response):
            comparison.differences.append(Difference(kafka.api_key, kafka.version, kafka.label, path, a, b))
    return comparison


def _version_table_apart(*responses: Any) -> None:
    """ApiVersions' table of versions is compared on its own (the report's Kafka-only and kfk-only rows): in the
    answers it only matters whether it is there."""
    for response in responses:
        if isinstance(response, dict) and response.get("api_keys"):
            response["api_keys"] = "<the version table>"


Scenario = Callable[[BrokerSession, int], None]


def run_scenarios(bootstrap: str, suffix: str, scenarios: Iterable[tuple[int, Scenario]],
                  versions: VersionTable, prepare: Callable[[BrokerSession], None] | None = None) -> list[Exchange]:
    """Run every scenario at every version of its API that both brokers advertise, against one broker, after
    `prepare` (unrecorded: waiting for what a broker creates lazily, such as its internal topics)."""
    with BrokerSession(bootstrap, suffix) as session:
        if prepare is not None:
            prepare(session)
        for api_key, scenario in scenarios:
            if api_key not in versions:
                continue
            lowest, highest = versions[api_key]
            for version in range(lowest, highest + 1):
                scenario(session, version)
        return session.exchanges


def differential_run(kafka_bootstrap: str, kfk_bootstrap: str, scenarios: Iterable[tuple[int, Scenario]],
                     prepare: Callable[[BrokerSession], None] | None = None) -> Comparison:
    """Everything once: both version tables, the scenarios at every common version against both brokers (at the
    same time, one thread each: they are separate processes), and the comparison."""
    kafka_versions, kfk_versions = advertised_versions(kafka_bootstrap), advertised_versions(kfk_bootstrap)
    common = common_versions(kafka_versions, kfk_versions)
    suffix = uuid.uuid4().hex[:10]
    scenarios = list(scenarios)
    with ThreadPoolExecutor(2) as pool:
        kafka_run = pool.submit(run_scenarios, kafka_bootstrap, suffix, scenarios, common, prepare)
        kfk_run = pool.submit(run_scenarios, kfk_bootstrap, suffix, scenarios, common, prepare)
        kafka_exchanges, kfk_exchanges = kafka_run.result(), kfk_run.result()
    return compare(kafka_exchanges, kfk_exchanges, suffix, kafka_versions, kfk_versions)
