"""JdbcSourceConnector: each table's new and changed rows as records, with Confluent's configs, records and offsets.

Each table is read by one query that resumes from the table's offset: `incrementing` takes rows whose
`incrementing.column.name` is above the last one seen (new rows), `timestamp` rows whose `timestamp.column.name` is
later than the last seen and earlier than the database's now minus `timestamp.delay.interval.ms` (new and updated
rows), `timestamp+incrementing` both (rows with equal timestamps told apart by the id), `bulk` the whole table each
time. A query's rows are handed out `batch.max.rows` per poll; a table is queried again `poll.interval.ms` after its
last query ended.

As Confluent's connector: the topic is `topic.prefix` + the table's name, the value a struct named after the table
with one field per column (optional where the column is nullable), no key (`ValueToKey` makes one); the source
partition is {"protocol": "1", "table": <database.schema.table>} (SQLite's: <table>) and the offset {"incrementing":
id} and/or {"timestamp": epoch ms, "timestamp_nanos": nanoseconds of that second}, so offsets written by either
connector are read by this one (the older partition {"table": <table>} too).
"""

from __future__ import annotations

import datetime
import heapq
import threading
import time
from typing import Any, Mapping

from kfk.connect.config_def import ConfigDef, ConfigException, ConfigKey, at_least, non_empty_string, one_of
from kfk.connect.connector import SourceConnector, SourceTask
from kfk.connect.connectors.jdbc.dialects import Column, Dialect, dialect_for, quote
from kfk.connect.data import EPOCH, SchemaBuilder, Struct
from kfk.connect.errors import ConnectException
from kfk.connect.records import SourceRecord

CONNECTION_URL_CONFIG = "connection.url"
CONNECTION_USER_CONFIG = "connection.user"
CONNECTION_PASSWORD_CONFIG = "connection.password"
MODE_CONFIG = "mode"
MODES = ("bulk", "incrementing", "timestamp", "timestamp+incrementing")
INCREMENTING_COLUMN_CONFIG = "incrementing.column.name"
TIMESTAMP_COLUMN_CONFIG = "timestamp.column.name"
TIMESTAMP_DELAY_CONFIG = "timestamp.delay.interval.ms"
TABLE_WHITELIST_CONFIG, TABLE_INCLUDE_LIST_CONFIG = "table.whitelist", "table.include.list"
TABLE_BLACKLIST_CONFIG, TABLE_EXCLUDE_LIST_CONFIG = "table.blacklist", "table.exclude.list"
TOPIC_PREFIX_CONFIG = "topic.prefix"
POLL_INTERVAL_CONFIG = "poll.interval.ms"
BATCH_MAX_ROWS_CONFIG = "batch.max.rows"
TABLES_CONFIG = "tables"  # the task's share of the tables, set by the connector

#: The longest poll() waits without returning (as FileStreamSource's 1 s).
IDLE_WAIT_SECONDS = 1.0

TABLE_KEY, PROTOCOL_KEY, PROTOCOL_VERSION_ONE = "table", "protocol", "1"
INCREMENTING_FIELD, TIMESTAMP_FIELD, TIMESTAMP_NANOS_FIELD = "incrementing", "timestamp", "timestamp_nanos"

CONNECTION_KEYS = [
    ConfigKey(CONNECTION_URL_CONFIG, "STRING", importance="HIGH",
              documentation="The JDBC URL: jdbc:sqlite:<file> or jdbc:postgresql://<host>:<port>/<database>.",
              validator=non_empty_string),
    ConfigKey(CONNECTION_USER_CONFIG, "STRING", None, "HIGH", "The database user."),
    ConfigKey(CONNECTION_PASSWORD_CONFIG, "PASSWORD", None, "HIGH", "The database user's password."),
]
SOURCE_CONFIG = ConfigDef([
    *CONNECTION_KEYS,
    ConfigKey(MODE_CONFIG, "STRING", importance="HIGH", documentation="How changed rows are found: " +
              ", ".join(MODES) + ".", validator=one_of(*MODES)),
    ConfigKey(INCREMENTING_COLUMN_CONFIG, "STRING", "", "MEDIUM",
              "The strictly increasing column that finds new rows (incrementing modes)."),
    ConfigKey(TIMESTAMP_COLUMN_CONFIG, "LIST", [], "MEDIUM",
              "The columns of the time a row last changed (timestamp modes); the first not null is used."),
    ConfigKey(TIMESTAMP_DELAY_CONFIG, "LONG", 0, "HIGH",
              "How long after a timestamp a row is read, for transactions that commit late.", validator=at_least(0)),
    ConfigKey(TABLE_WHITELIST_CONFIG, "LIST", [], "MEDIUM", "The tables to read (all when empty)."),
    ConfigKey(TABLE_INCLUDE_LIST_CONFIG, "LIST", [], "MEDIUM", "The tables to read (table.whitelist's new name)."),
    ConfigKey(TABLE_BLACKLIST_CONFIG, "LIST", [], "MEDIUM", "Tables not to read."),
    ConfigKey(TABLE_EXCLUDE_LIST_CONFIG, "LIST", [], "MEDIUM", "Tables not to read (table.blacklist's new name)."),
    ConfigKey(TOPIC_PREFIX_CONFIG, "STRING", importance="HIGH",
              documentation="Prefixed to a table's name: the topic its rows go to."),
    ConfigKey(POLL_INTERVAL_CONFIG, "INT", 5000, "HIGH", "How often each table is queried.", validator=at_least(1)),
    ConfigKey(BATCH_MAX_ROWS_CONFIG, "INT", 100, "LOW", "The most rows one poll returns.", validator=at_least(1)),
])
TASK_CONFIG = SOURCE_CONFIG.merged(ConfigDef([ConfigKey(TABLES_CONFIG, "LIST", importance="HIGH",
                                                        documentation="The tables this task reads.")]))


def dialect_of(parsed: Mapping[str, Any]) -> Dialect:
    return dialect_for(parsed[CONNECTION_URL_CONFIG], parsed[CONNECTION_USER_CONFIG],
                       parsed[CONNECTION_PASSWORD_CONFIG])


def _check_mode(parsed: Mapping[str, Any]) -> None:
    mode = parsed[MODE_CONFIG]
    if "incrementing" in mode and not parsed[INCREMENTING_COLUMN_CONFIG]:
        raise ConfigException(f"Invalid value for configuration {INCREMENTING_COLUMN_CONFIG}: mode {mode} needs "
                              "the incrementing column's name")
    if "timestamp" in mode and not parsed[TIMESTAMP_COLUMN_CONFIG]:
        raise ConfigException(f"Invalid value for configuration {TIMESTAMP_COLUMN_CONFIG}: mode {mode} needs "
                              "the timestamp column's name")


class JdbcSourceConnector(SourceConnector):
    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        parsed = SOURCE_CONFIG.parse(props)
        _check_mode(parsed)
        dialect = dialect_of(parsed)
        included = parsed[TABLE_INCLUDE_LIST_CONFIG] or parsed[TABLE_WHITELIST_CONFIG]
        excluded = set(parsed[TABLE_EXCLUDE_LIST_CONFIG] or parsed[TABLE_BLACKLIST_CONFIG])
        if included:
            self.tables = [table for table in included if table not in excluded]
        else:
            connection = dialect.connect()
            try:
                self.tables = [table for table in dialect.table_names(connection) if table not in excluded]
            finally:
                connection.close()

    def validate(self, props: Mapping[str, str]) -> dict[str, tuple[Any, list[str]]]:
        """Each key's errors, and a mode's missing column as an error of that column's key."""
        results = super().validate(props)
        try:
            parsed = SOURCE_CONFIG.parse(props)
        except ConfigException:
            return results  # another key's error, reported under that key
        try:
            _check_mode(parsed)
        except ConfigException as error:
            key = INCREMENTING_COLUMN_CONFIG if INCREMENTING_COLUMN_CONFIG in str(error) else TIMESTAMP_COLUMN_CONFIG
            results[key] = (results[key][0], [*results[key][1], str(error)])
        return results

    def task_class(self) -> type:
        return JdbcSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """The tables dealt round-robin to at most `max_tasks` tasks (no task without a table)."""
        groups = [self.tables[index::max_tasks] for index in range(min(max_tasks, len(self.tables)))]
        return [{**self.props, TABLES_CONFIG: ",".join(group)} for group in groups]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return SOURCE_CONFIG


def _timestamp_offset(value: datetime.datetime) -> dict[str, int]:
    """Java's Timestamp as Confluent stores it: getTime() (ms) and getNanos() (the nanoseconds of its second)."""
    delta = value - EPOCH
    seconds = delta.days * 86_400 + delta.seconds
    return {TIMESTAMP_FIELD: seconds * 1000 + delta.microseconds // 1000,
            TIMESTAMP_NANOS_FIELD: delta.microseconds * 1000}


def _timestamp_from_offset(offset: Mapping[str, Any]) -> datetime.datetime | None:
    millis = offset.get(TIMESTAMP_FIELD)
    if millis is None:
        return None
    nanos = offset.get(TIMESTAMP_NANOS_FIELD)
    micros = (millis // 1000) * 1_000_000 + (nanos // 1000 if nanos is not None else (millis % 1000) * 1000)
    return EPOCH + datetime.timedelta(microseconds=micros)


class TableQuerier:
    """One table's query and position: what `timestamp`/`incrementing` values were last emitted."""

    def __init__(self, task: JdbcSourceTask, table: str, offset: Mapping[str, Any] | None) -> None:
        self.task, self.table = task, table
        dialect = task.dialect
        self.columns: list[Column] = dialect.columns(task.connection, table)
        self.column_index = {column.name: index for index, column in enumerate(self.columns)}
        for name in [task.incrementing_column] * bool(task.incrementing_column) + task.timestamp_columns:
            if name not in self.column_index:
                raise ConnectException(f"Column {name} not found in table {table}")
        short_name = table.rsplit(".", 1)[-1]
        builder = SchemaBuilder.struct().name(short_name)
        for column in self.columns:
            builder.field(column.name, column.schema)
        self.schema = builder.build()
        self.topic = task.topic_prefix + short_name
        self.partition = {PROTOCOL_KEY: PROTOCOL_VERSION_ONE,
                          TABLE_KEY: dialect.qualified_names(task.connection, table)[0]}
        offset = offset or {}
        self.incrementing: int | None = offset.get(INCREMENTING_FIELD)
        self.timestamp = _timestamp_from_offset(offset)
        self.cursor: Any = None
        self.next_query = 0.0  # time.monotonic() of the next query

    def _query(self) -> tuple[str, list[Any]]:
        task, dialect = self.task, self.task.dialect
        sql = f"SELECT * FROM {dialect.quoted_table(self.table)}"
        parameters: list[Any] = []
        incrementing = quote(task.incrementing_column) if task.incrementing_column else None
        timestamp = None
        if task.timestamp_columns:
            quoted = [quote(name) for name in task.timestamp_columns]
            timestamp = dialect.timestamp_expression(
                quoted[0] if len(quoted) == 1 else f"COALESCE({', '.join(quoted)})")
        mode, mark = task.mode, dialect.placeholder
        if mode == "incrementing":
            sql += f" WHERE {incrementing} > {mark} ORDER BY {incrementing} ASC"
            parameters = [self.incrementing if self.incrementing is not None else -1]
        elif mode.startswith("timestamp"):
            now = task.connection.execute(dialect.now_sql()).fetchone()[0]
            end = dialect.timestamp_parameter(dialect.read_timestamp(now) - task.timestamp_delay)
            start = dialect.timestamp_parameter(self.timestamp or EPOCH)
            if mode == "timestamp":
                sql += f" WHERE {timestamp} > {mark} AND {timestamp} < {mark} ORDER BY {timestamp} ASC"
                parameters = [start, end]
            else:
                sql += (f" WHERE {timestamp} < {mark} AND (({timestamp} = {mark} AND {incrementing} > {mark}) OR "
                        f"{timestamp} > {mark}) ORDER BY {timestamp}, {incrementing} ASC")
                parameters = [end, start, self.incrementing if self.incrementing is not None else -1, start]
        return sql, parameters

    def _record(self, row: tuple) -> SourceRecord:
        value = Struct(self.schema)
        for column, item in zip(self.columns, row):
            value.put(column.name, None if item is None else column.to_connect(item))
        offset: dict[str, Any] = {}
        if self.task.incrementing_column:
            self.incrementing = value.get(self.task.incrementing_column)
            offset[INCREMENTING_FIELD] = self.incrementing
        if self.task.timestamp_columns:
            stamps = [row[self.column_index[name]] for name in self.task.timestamp_columns
                      if row[self.column_index[name]] is not None]  # COALESCE's order
            if stamps:
                self.timestamp = self.task.dialect.read_timestamp(stamps[0])
                offset.update(_timestamp_offset(self.timestamp))
        return SourceRecord(self.topic, None, None, None, self.schema, value, source_partition=self.partition,
                            source_offset=offset or None)

    def read(self, max_rows: int) -> list[SourceRecord]:
        """The next rows of the current query (starting it if none runs); ends the query when it has no more."""
        connection = self.task.connection
        if self.cursor is None:
            sql, parameters = self._query()
            self.cursor = connection.execute(sql, parameters)
        rows = self.cursor.fetchmany(max_rows)
        records = [self._record(row) for row in rows]
        if len(rows) < max_rows:
            self.cursor.close()
            self.cursor = None
            connection.commit()  # end the read transaction: the next query sees rows committed since
            self.next_query = time.monotonic() + self.task.poll_interval
        return records


class JdbcSourceTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        parsed = TASK_CONFIG.parse(props)
        _check_mode(parsed)
        self.dialect = dialect_of(parsed)
        self.mode: str = parsed[MODE_CONFIG]
        self.incrementing_column: str = parsed[INCREMENTING_COLUMN_CONFIG] if "incrementing" in self.mode else ""
        self.timestamp_columns: list[str] = parsed[TIMESTAMP_COLUMN_CONFIG] if "timestamp" in self.mode else []
        self.timestamp_delay = datetime.timedelta(milliseconds=parsed[TIMESTAMP_DELAY_CONFIG])
        self.topic_prefix: str = parsed[TOPIC_PREFIX_CONFIG]
        self.poll_interval = parsed[POLL_INTERVAL_CONFIG] / 1000
        self.batch_max_rows: int = parsed[BATCH_MAX_ROWS_CONFIG]
        self.stopping = threading.Event()
        self.connection = self.dialect.connect()
        reader = self.context.offset_storage_reader
        self.queue: list[tuple[float, int, TableQuerier]] = []
        for index, table in enumerate(parsed[TABLES_CONFIG]):
            # protocol 1's partitions, then protocol 0's: the table's bare name
            partitions = [{PROTOCOL_KEY: PROTOCOL_VERSION_ONE, TABLE_KEY: name}
                          for name in self.dialect.qualified_names(self.connection, table)]
            partitions.append({TABLE_KEY: table.rsplit(".", 1)[-1]})
            offset = next(filter(None, map(reader.offset, partitions)), None)
            if self.mode == "bulk":
                offset = None
            self.queue.append((0.0, index, TableQuerier(self, table, offset)))
        heapq.heapify(self.queue)

    def poll(self) -> list[SourceRecord] | None:
        """The rows of the table due first. When none is due it waits, at most IDLE_WAIT_SECONDS (the worker
        stores offsets between polls) and returns nothing."""
        while not self.stopping.is_set():
            due, index, querier = self.queue[0]
            wait = due - time.monotonic()
            if wait > 0:
                if not self.stopping.wait(min(wait, IDLE_WAIT_SECONDS)):
                    return None
                break
            records = querier.read(self.batch_max_rows)
            heapq.heapreplace(self.queue, (querier.next_query, index, querier))
            if records:
                return records
        self.connection.close()  # here, on the thread that uses it: stop() comes from another one
        return None

    def stop(self) -> None:
        self.stopping.set()
