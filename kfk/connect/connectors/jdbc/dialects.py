"""What differs between the databases the JDBC connectors speak to: how a `connection.url` connects, how tables
and columns are listed, which Connect schema a column type reads as, which SQL type a Connect schema is created as,
and how values cross over.

The URLs are JDBC's, so that a Confluent connector config works unchanged: `jdbc:sqlite:/path/to.db` and
`jdbc:postgresql://host:port/database?user=..&password=..` (also `connection.user`/`connection.password`). Both
databases take `INSERT .. ON CONFLICT (pk) DO UPDATE`, the sink's upsert. PostgreSQL sessions run in UTC, so
`timestamp` columns hold UTC times as Confluent's `db.timezone` default has them.
"""

from __future__ import annotations

import datetime
import decimal
import sqlite3
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import parse_qsl, unquote, urlsplit

from kfk.connect.config_def import ConfigException
from kfk.connect.data import (
    BOOLEAN_SCHEMA, BYTES_SCHEMA, DATE_LOGICAL_NAME, DECIMAL_LOGICAL_NAME, DECIMAL_SCALE_PARAMETER, FLOAT32_SCHEMA,
    FLOAT64_SCHEMA, INT16_SCHEMA, INT32_SCHEMA, INT64_SCHEMA, INT8_SCHEMA, STRING_SCHEMA, TIME_LOGICAL_NAME,
    TIMESTAMP_LOGICAL_NAME, Schema, SchemaBuilder, Type, date_schema, decimal_schema, time_schema, timestamp_schema)
from kfk.connect.errors import ConnectException

#: A column's value as the database driver returns it -> its Connect value.
ToConnect = Callable[[Any], Any]


@dataclass(frozen=True)
class Column:
    name: str
    schema: Schema  # optional when the column is nullable
    to_connect: ToConnect


def _identity(value: Any) -> Any:
    return value


def _utc(value: datetime.datetime) -> datetime.datetime:
    return value.replace(tzinfo=datetime.timezone.utc) if value.tzinfo is None else \
        value.astimezone(datetime.timezone.utc)


def _optional(schema: Schema, nullable: bool) -> Schema:
    if not nullable:
        return schema
    return SchemaBuilder.of(schema).optional().build()


def quote(identifier: str) -> str:
    """An identifier quoted as SQL's standard has it (Confluent's default `quote.sql.identifiers=always`)."""
    return '"' + identifier.replace('"', '""') + '"'


class Dialect:
    """One database's ways; `connect()` opens a DB-API connection (autocommit off)."""

    name: str
    placeholder: str

    def connect(self) -> Any:
        raise NotImplementedError

    def table_names(self, connection: Any) -> list[str]:
        raise NotImplementedError

    def columns(self, connection: Any, table: str) -> list[Column]:
        raise NotImplementedError

    def qualified_names(self, connection: Any, table: str) -> list[str]:
        """The table as Confluent's offsets (protocol 1) name it, the name written first: its fully qualified
        name as the JDBC driver's table listing gives it (catalog, schema, table; SQLite has neither)."""
        return [table]

    def quoted_table(self, table: str) -> str:
        return ".".join(quote(part) for part in table.split("."))

    def now_sql(self) -> str:
        """A SELECT of the database's current UTC time (the upper bound of timestamp-mode queries)."""
        raise NotImplementedError

    def timestamp_expression(self, column_sql: str) -> str:
        """How a timestamp column is compared with a timestamp parameter."""
        return column_sql

    def timestamp_parameter(self, value: datetime.datetime) -> Any:
        return value

    def read_timestamp(self, value: Any) -> datetime.datetime:
        return _utc(value)

    def sql_type(self, schema: Schema) -> str:
        raise NotImplementedError

    def to_database(self, schema: Schema | None, value: Any) -> Any:
        """A Connect value as the driver takes it."""
        return value


# --- SQLite -----------------------------------------------------------------------------------------------------

SQLITE_TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%f"  # SQLite's strftime: milliseconds, what the columns are compared as


def _sqlite_timestamp(value: Any) -> datetime.datetime:
    if isinstance(value, (int, float)):  # stored as milliseconds since the epoch
        return datetime.datetime.fromtimestamp(value / 1000, datetime.timezone.utc)
    return _utc(datetime.datetime.fromisoformat(str(value)))


def _sqlite_date(value: Any) -> datetime.date:
    return datetime.date.fromisoformat(str(value))


def _sqlite_time(value: Any) -> datetime.time:
    return datetime.time.fromisoformat(str(value))


class SqliteDialect(Dialect):
    """SQLite through the standard library. Types follow the declared column type as SQLite's own affinity rules
    read it; DATE, TIME and TIMESTAMP/DATETIME columns hold ISO-8601 text (what SQLite's date functions take)."""

    name = "SQLite"
    placeholder = "?"

    def __init__(self, path: str) -> None:
        self.path = path

    def connect(self) -> sqlite3.Connection:
        # tasks are started, polled and stopped from different worker threads, never at the same time
        return sqlite3.connect(self.path, check_same_thread=False, timeout=30)

    def table_names(self, connection: Any) -> list[str]:
        rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                  "AND name NOT LIKE 'sqlite_%' ORDER BY name").fetchall()
        return [row[0] for row in rows]

    def columns(self, connection: Any, table: str) -> list[Column]:
        rows = connection.execute(f"PRAGMA table_info({quote(table)})").fetchall()
        if not rows:
            raise ConnectException(f"Table {table} does not exist")
        columns = []
        for _, name, declared, not_null, _, primary_key in rows:
            integer_key = primary_key and declared.upper() == "INTEGER"  # the rowid: never null
            schema, to_connect = self._schema_of(declared.upper())
            columns.append(Column(name, _optional(schema, not (not_null or integer_key)), to_connect))
        return columns

    @staticmethod
    def _schema_of(declared: str) -> tuple[Schema, ToConnect]:
        if declared in ("TIMESTAMP", "DATETIME"):
            return timestamp_schema().build(), _sqlite_timestamp
        if declared == "DATE":
            return date_schema().build(), _sqlite_date
        if declared == "TIME":
            return time_schema().build(), _sqlite_time
        if declared in ("BOOLEAN", "BOOL"):
            return BOOLEAN_SCHEMA, bool
        if declared == "BIGINT":
            return INT64_SCHEMA, _identity
        if declared == "SMALLINT":
            return INT16_SCHEMA, _identity
        if declared == "TINYINT":
            return INT8_SCHEMA, _identity
        if "INT" in declared:
            return INT32_SCHEMA, _identity
        if any(word in declared for word in ("CHAR", "CLOB", "TEXT")):
            return STRING_SCHEMA, _identity
        if "BLOB" in declared or not declared:
            return BYTES_SCHEMA, _identity
        if any(word in declared for word in ("REAL", "FLOA", "DOUB")):
            return FLOAT64_SCHEMA, float
        return STRING_SCHEMA, str  # NUMERIC affinity and the rest: the value's text

    def now_sql(self) -> str:
        return f"SELECT strftime('{SQLITE_TIMESTAMP_FORMAT}', 'now')"

    def timestamp_expression(self, column_sql: str) -> str:
        return f"strftime('{SQLITE_TIMESTAMP_FORMAT}', {column_sql})"

    def timestamp_parameter(self, value: datetime.datetime) -> Any:
        return _utc(value).strftime("%Y-%m-%d %H:%M:%S.") + f"{value.microsecond // 1000:03d}"

    def read_timestamp(self, value: Any) -> datetime.datetime:
        return _sqlite_timestamp(value)

    def sql_type(self, schema: Schema) -> str:
        logical = {TIMESTAMP_LOGICAL_NAME: "TIMESTAMP", DATE_LOGICAL_NAME: "DATE", TIME_LOGICAL_NAME: "TIME",
                   DECIMAL_LOGICAL_NAME: "NUMERIC"}.get(schema.name or "")
        if logical:
            return logical
        return {Type.INT8: "INTEGER", Type.INT16: "INTEGER", Type.INT32: "INTEGER", Type.INT64: "INTEGER",
                Type.FLOAT32: "REAL", Type.FLOAT64: "REAL", Type.BOOLEAN: "INTEGER", Type.STRING: "TEXT",
                Type.BYTES: "BLOB"}.get(schema.type) or _unsupported(self, schema)

    def to_database(self, schema: Schema | None, value: Any) -> Any:
        if isinstance(value, datetime.datetime):
            return _utc(value).strftime("%Y-%m-%d %H:%M:%S.") + f"{value.microsecond // 1000:03d}"
        if isinstance(value, (datetime.date, datetime.time)):
            return value.isoformat()
        if isinstance(value, decimal.Decimal):
            return str(value)
        return value


# --- PostgreSQL --------------------------------------------------------------------------------------------------

def _bytes(value: Any) -> bytes:
    return bytes(value)


class PostgresDialect(Dialect):
    """PostgreSQL through psycopg 3 (imported when a connector first connects, so that kfk runs without it)."""

    name = "PostgreSQL"
    placeholder = "%s"

    def __init__(self, conninfo: dict[str, str]) -> None:
        self.conninfo = conninfo

    def connect(self) -> Any:
        try:
            import psycopg
        except ImportError:
            raise ConnectException("PostgreSQL needs psycopg: pip install 'kfk[connect-jdbc]'") from None
        try:
            options = f"{self.conninfo.get('options', '')} -c TimeZone=UTC".strip()
            connection = psycopg.connect(**{**self.conninfo, "options": options})
        except psycopg.OperationalError as error:
            raise ConnectException(f"Could not connect to PostgreSQL: {error}".strip()) from error
        return connection

    def _split(self, table: str) -> tuple[str, str]:
        schema, _, name = table.rpartition(".")
        return schema or "public", name

    def qualified_names(self, connection: Any, table: str) -> list[str]:
        """pgjdbc lists tables with the database as their catalog: "db.schema.table" (and "schema.table" read too)."""
        schema_table = ".".join(self._split(table))
        return [f"{connection.info.dbname}.{schema_table}", schema_table]

    def table_names(self, connection: Any) -> list[str]:
        rows = connection.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
                                  "AND table_type = 'BASE TABLE' ORDER BY table_name").fetchall()
        connection.commit()
        return [row[0] for row in rows]

    def columns(self, connection: Any, table: str) -> list[Column]:
        schema_name, name = self._split(table)
        rows = connection.execute(
            "SELECT column_name, data_type, is_nullable, numeric_scale FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position", (schema_name, name)).fetchall()
        connection.commit()
        if not rows:
            raise ConnectException(f"Table {table} does not exist")
        return [Column(column, _optional(schema, nullable == "YES"), to_connect)
                for column, data_type, nullable, scale in rows
                for schema, to_connect in [self._schema_of(data_type, scale)]]

    @staticmethod
    def _schema_of(data_type: str, scale: int | None) -> tuple[Schema, ToConnect]:
        simple = {"smallint": INT16_SCHEMA, "integer": INT32_SCHEMA, "bigint": INT64_SCHEMA,
                  "real": FLOAT32_SCHEMA, "double precision": FLOAT64_SCHEMA, "boolean": BOOLEAN_SCHEMA,
                  "text": STRING_SCHEMA, "character varying": STRING_SCHEMA, "character": STRING_SCHEMA}
        if data_type in simple:
            return simple[data_type], _identity
        if data_type == "bytea":
            return BYTES_SCHEMA, _bytes
        if data_type.startswith("timestamp"):
            return timestamp_schema().build(), _utc
        if data_type == "date":
            return date_schema().build(), _identity
        if data_type == "time without time zone":
            return time_schema().build(), _identity
        if data_type == "numeric" and scale is not None:
            exponent = decimal.Decimal(1).scaleb(-scale)
            return decimal_schema(scale).build(), lambda value: value.quantize(exponent)
        return STRING_SCHEMA, str  # uuid, json, unbounded numeric, ...: their text

    def now_sql(self) -> str:
        return "SELECT LOCALTIMESTAMP"

    def sql_type(self, schema: Schema) -> str:
        if schema.name == DECIMAL_LOGICAL_NAME:
            return f"DECIMAL(1000,{(schema.parameters or {}).get(DECIMAL_SCALE_PARAMETER, 0)})"
        logical = {TIMESTAMP_LOGICAL_NAME: "TIMESTAMP", DATE_LOGICAL_NAME: "DATE", TIME_LOGICAL_NAME: "TIME"}
        if schema.name in logical:
            return logical[schema.name]
        return {Type.INT8: "SMALLINT", Type.INT16: "SMALLINT", Type.INT32: "INT", Type.INT64: "BIGINT",
                Type.FLOAT32: "REAL", Type.FLOAT64: "DOUBLE PRECISION", Type.BOOLEAN: "BOOLEAN", Type.STRING: "TEXT",
                Type.BYTES: "BYTEA"}.get(schema.type) or _unsupported(self, schema)

    def to_database(self, schema: Schema | None, value: Any) -> Any:
        if isinstance(value, datetime.datetime):
            return _utc(value).replace(tzinfo=None)  # a `timestamp` column, in UTC
        return value


def _unsupported(dialect: Dialect, schema: Schema) -> str:
    raise ConnectException(f"{schema.type.name} ({schema.name or 'no logical type'}) is not supported by the "
                           f"{dialect.name} dialect")


def dialect_for(url: str, user: str | None = None, password: str | None = None) -> Dialect:
    """The dialect of a JDBC `connection.url` (user and password given apart override the URL's)."""
    if url.startswith("jdbc:sqlite:"):
        path = url[len("jdbc:sqlite:"):]
        if not path:
            raise ConfigException(f"Invalid value {url} for configuration connection.url: no database file")
        return SqliteDialect(path)
    if url.startswith("jdbc:postgresql:"):
        parts = urlsplit(url[len("jdbc:"):])
        conninfo: dict[str, str] = {}
        if parts.hostname:
            conninfo["host"] = parts.hostname
        if parts.port:
            conninfo["port"] = str(parts.port)
        database = unquote(parts.path.lstrip("/")) if parts.netloc else unquote(parts.path)
        if database:
            conninfo["dbname"] = database
        conninfo.update(parse_qsl(parts.query))
        if user:
            conninfo["user"] = user
        if password:
            conninfo["password"] = password
        return PostgresDialect(conninfo)
    raise ConfigException(f"Invalid value {url} for configuration connection.url: kfk's JDBC connectors support "
                          "jdbc:sqlite:<file> and jdbc:postgresql://<host>:<port>/<database> URLs")
