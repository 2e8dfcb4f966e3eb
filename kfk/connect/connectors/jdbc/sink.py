"""JdbcSinkConnector: records with struct values written as table rows, with Confluent's configs.

Each record is a row of the table `table.name.format` names (`${topic}` replaced by its topic), created first when
`auto.create` is set. `insert.mode` says how: `insert`, `upsert` (INSERT .. ON CONFLICT (primary key) DO UPDATE, in
both SQLite and PostgreSQL) or `update`. The primary key is chosen by `pk.mode`: `none`, `kafka` (the record's
topic, partition and offset), `record_key` (the key: a primitive as the one column `pk.fields` names, a struct's
fields, all of them or those `pk.fields` lists) or `record_value` (the value's fields `pk.fields` lists, all when
empty). With `delete.enabled` (and pk.mode record_key) a tombstone deletes its key's row. Each put() is one
transaction, committed before the worker commits the consumer's offsets: at-least-once, and with upserts a replay
writes the same rows again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from kfk.connect.config_def import ConfigDef, ConfigException, ConfigKey, at_least, one_of
from kfk.connect.connector import SinkConnector, SinkTask
from kfk.connect.connectors.jdbc.dialects import Dialect, quote
from kfk.connect.connectors.jdbc.source import CONNECTION_KEYS, dialect_of
from kfk.connect.data import INT32_SCHEMA, INT64_SCHEMA, STRING_SCHEMA, Schema, Struct, Type
from kfk.connect.errors import ConnectException
from kfk.connect.records import SinkRecord

INSERT_MODE_CONFIG, INSERT_MODES = "insert.mode", ("insert", "upsert", "update")
PK_MODE_CONFIG, PK_MODES = "pk.mode", ("none", "kafka", "record_key", "record_value")
PK_FIELDS_CONFIG = "pk.fields"
AUTO_CREATE_CONFIG = "auto.create"
TABLE_NAME_FORMAT_CONFIG = "table.name.format"
DELETE_ENABLED_CONFIG = "delete.enabled"
BATCH_SIZE_CONFIG = "batch.size"
#: pk.mode kafka's default columns, and record_key's column for a primitive key (Confluent's names).
KAFKA_PK_FIELDS = ("__connect_topic", "__connect_partition", "__connect_offset")

SINK_CONFIG = ConfigDef([
    *CONNECTION_KEYS,
    ConfigKey(INSERT_MODE_CONFIG, "STRING", "insert", "HIGH", "insert, upsert or update.",
              validator=one_of(*INSERT_MODES)),
    ConfigKey(PK_MODE_CONFIG, "STRING", "none", "HIGH", "Where the primary key comes from: none, kafka, "
              "record_key or record_value.", validator=one_of(*PK_MODES)),
    ConfigKey(PK_FIELDS_CONFIG, "LIST", [], "MEDIUM", "The primary key's columns (see pk.mode)."),
    ConfigKey(AUTO_CREATE_CONFIG, "BOOLEAN", False, "MEDIUM", "Whether a missing table is created."),
    ConfigKey(TABLE_NAME_FORMAT_CONFIG, "STRING", "${topic}", "MEDIUM",
              "The table a record is written to; ${topic} stands for its topic."),
    ConfigKey(DELETE_ENABLED_CONFIG, "BOOLEAN", False, "MEDIUM",
              "Whether a null value deletes its key's row (needs pk.mode record_key)."),
    ConfigKey(BATCH_SIZE_CONFIG, "INT", 3000, "MEDIUM", "The most rows written by one statement batch.",
              validator=at_least(1)),
])


def _check(parsed: Mapping[str, Any]) -> None:
    if parsed[DELETE_ENABLED_CONFIG] and parsed[PK_MODE_CONFIG] != "record_key":
        raise ConfigException(f"Invalid value {parsed[PK_MODE_CONFIG]} for configuration {PK_MODE_CONFIG}: "
                              "Deletes are only supported for pk.mode record_key")
    if parsed[INSERT_MODE_CONFIG] != "insert" and parsed[PK_MODE_CONFIG] == "none":
        raise ConfigException(f"Invalid value none for configuration {PK_MODE_CONFIG}: insert.mode "
                              f"{parsed[INSERT_MODE_CONFIG]} needs a primary key")


class JdbcSinkConnector(SinkConnector):
    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        _check(SINK_CONFIG.parse(props))

    def task_class(self) -> type:
        return JdbcSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass

    def config(self) -> ConfigDef:
        return SINK_CONFIG

    def alter_offsets(self, config: Mapping[str, str], offsets: Mapping[Any, int | None]) -> bool:
        return True  # only the consumer group's offsets are involved


@dataclass(frozen=True)
class RowLayout:
    """How records of one key schema and value schema become a row: the key columns, the other columns, and
    each column's schema (for auto.create)."""
    key_columns: tuple[str, ...]
    value_columns: tuple[str, ...]
    schemas: dict[str, Schema]


class JdbcSinkTask(SinkTask):
    def start(self, props: Mapping[str, str]) -> None:
        parsed = SINK_CONFIG.parse(props)
        _check(parsed)
        self.dialect: Dialect = dialect_of(parsed)
        self.insert_mode: str = parsed[INSERT_MODE_CONFIG]
        self.pk_mode: str = parsed[PK_MODE_CONFIG]
        self.pk_fields: list[str] = parsed[PK_FIELDS_CONFIG]
        self.auto_create: bool = parsed[AUTO_CREATE_CONFIG]
        self.table_format: str = parsed[TABLE_NAME_FORMAT_CONFIG]
        self.delete_enabled: bool = parsed[DELETE_ENABLED_CONFIG]
        self.batch_size: int = parsed[BATCH_SIZE_CONFIG]
        self.connection = self.dialect.connect()
        self.layouts: dict[tuple[Schema | None, Schema | None], RowLayout] = {}
        self.known_tables: set[str] = set()

    # --- which columns ------------------------------------------------------------------------------------------

    def _layout(self, record: SinkRecord) -> RowLayout:
        cache_key = (record.key_schema, record.value_schema)
        layout = self.layouts.get(cache_key)
        if layout is None:
            layout = self.layouts[cache_key] = self._new_layout(record)
        return layout

    def _new_layout(self, record: SinkRecord) -> RowLayout:
        value_schema = record.value_schema
        if record.value is not None and (value_schema is None or value_schema.type is not Type.STRUCT):
            raise ConnectException(f"The JDBC sink needs records with a Struct value and schema (converter "
                                   f"schemas.enable=true or a schema registry), found {type(record.value).__name__} "
                                   f"(topic '{record.topic}', partition {record.kafka_partition}, offset "
                                   f"{record.kafka_offset})")
        value_fields = {field.name: field.schema for field in value_schema.fields} if value_schema else {}
        schemas: dict[str, Schema] = {}
        if self.pk_mode == "kafka":
            names = self.pk_fields or list(KAFKA_PK_FIELDS)
            if len(names) != 3:
                raise ConnectException("PK mode for table is kafka so there should either be no field names "
                                       f"defined for defaults {list(KAFKA_PK_FIELDS)} to be applicable, or "
                                       f"exactly 3, defined fields are: {names}")
            schemas.update(zip(names, (STRING_SCHEMA, INT32_SCHEMA, INT64_SCHEMA)))
        elif self.pk_mode == "record_key":
            key_schema = record.key_schema
            if key_schema is None:
                raise ConnectException(f"PK mode for table is record_key, but record key schema is missing "
                                       f"(topic '{record.topic}', offset {record.kafka_offset})")
            if key_schema.type is Type.STRUCT:
                key_fields = {field.name: field.schema for field in key_schema.fields}
                for name in self.pk_fields or list(key_fields):
                    if name not in key_fields:
                        raise ConnectException(f"PK mode for table is record_key with configured PK fields "
                                               f"{self.pk_fields}, but record key schema does not contain field: "
                                               f"{name}")
                    schemas[name] = key_fields[name]
            else:
                if len(self.pk_fields) != 1:
                    raise ConnectException("Need exactly one PK column defined since the key schema for records "
                                           f"is a primitive type, defined columns are: {self.pk_fields}")
                schemas[self.pk_fields[0]] = key_schema
        elif self.pk_mode == "record_value":
            for name in self.pk_fields or list(value_fields):
                if name not in value_fields:
                    raise ConnectException(f"PK mode for table is record_value with configured PK fields "
                                           f"{self.pk_fields}, but record value schema does not contain field: {name}")
                schemas[name] = value_fields[name]
        key_columns = tuple(schemas)
        value_columns = tuple(name for name in value_fields if name not in schemas)
        schemas.update((name, value_fields[name]) for name in value_columns)
        return RowLayout(key_columns, value_columns, schemas)

    def _key_values(self, record: SinkRecord, layout: RowLayout) -> list[Any]:
        if self.pk_mode == "kafka":
            return [record.topic, record.kafka_partition, record.kafka_offset]
        if self.pk_mode == "record_key":
            if isinstance(record.key, Struct):
                return [self._field(record.key, name) for name in layout.key_columns]
            return [self.dialect.to_database(record.key_schema, record.key)]
        return [self._field(record.value, name) for name in layout.key_columns]

    def _field(self, struct: Struct, name: str) -> Any:
        return self.dialect.to_database(struct.schema.field(name).schema, struct.get(name))

    # --- SQL ----------------------------------------------------------------------------------------------------

    def _ensure_table(self, table: str, layout: RowLayout) -> None:
        if table in self.known_tables:
            return
        try:
            self.dialect.columns(self.connection, table)
        except ConnectException:
            if not self.auto_create:
                raise ConnectException(f"Table {quote(table)} is missing and auto-creation is disabled") from None
            definitions = [f"{quote(name)} {self.dialect.sql_type(schema)}"
                           f"{'' if schema.optional and name not in layout.key_columns else ' NOT NULL'}"
                           for name, schema in layout.schemas.items()]
            if layout.key_columns:
                definitions.append(f"PRIMARY KEY({', '.join(map(quote, layout.key_columns))})")
            self.connection.execute(f"CREATE TABLE {self.dialect.quoted_table(table)} ({', '.join(definitions)})")
            self.connection.commit()
        self.known_tables.add(table)

    def _statement(self, table: str, layout: RowLayout, delete: bool) -> str:
        quoted_table, mark = self.dialect.quoted_table(table), self.dialect.placeholder
        where = " AND ".join(f"{quote(name)} = {mark}" for name in layout.key_columns)
        if delete:
            return f"DELETE FROM {quoted_table} WHERE {where}"
        if self.insert_mode == "update":
            assignments = ", ".join(f"{quote(name)} = {mark}" for name in layout.value_columns)
            return f"UPDATE {quoted_table} SET {assignments} WHERE {where}"
        columns = layout.key_columns + layout.value_columns
        sql = (f"INSERT INTO {quoted_table} ({', '.join(map(quote, columns))}) "
               f"VALUES ({', '.join([mark] * len(columns))})")
        if self.insert_mode == "upsert":
            updates = ", ".join(f"{quote(name)} = EXCLUDED.{quote(name)}" for name in layout.value_columns)
            sql += f" ON CONFLICT ({', '.join(map(quote, layout.key_columns))}) " + \
                (f"DO UPDATE SET {updates}" if updates else "DO NOTHING")
        return sql

    def put(self, records: list[SinkRecord]) -> None:
        """Consecutive records with the same statement go as one executemany (up to batch.size rows)."""
        batch: list[list[Any]] = []
        batch_sql = ""
        try:
            for record in records:
                delete = record.value is None
                if delete and not self.delete_enabled:
                    continue  # a tombstone without delete.enabled: nothing to write (Confluent skips it too)
                layout = self._layout(record)
                table = self.table_format.replace("${topic}", record.topic)
                self._ensure_table(table, layout)
                sql = self._statement(table, layout, delete)
                keys = self._key_values(record, layout)
                values = [] if delete else [self._field(record.value, name) for name in layout.value_columns]
                row = keys if delete else (values + keys if self.insert_mode == "update" else keys + values)
                if sql != batch_sql or len(batch) >= self.batch_size:
                    self._execute(batch_sql, batch)
                    batch, batch_sql = [], sql
                batch.append(row)
            self._execute(batch_sql, batch)
            self.connection.commit()
        except BaseException:
            self.connection.rollback()
            raise

    def _execute(self, sql: str, rows: list[list[Any]]) -> None:
        if rows:
            self.connection.cursor().executemany(sql, rows)

    def stop(self) -> None:
        self.connection.close()
