"""The JDBC source and sink connectors on real databases: a table -> kfk's JdbcSourceConnector -> a topic -> kfk's
JdbcSinkConnector (upserts) -> another table, with SQLite files and with a PostgreSQL server (Debian's, started by
kfk.testing.postgres). Configs are written as for Confluent's connectors (its class names, keys and JDBC URLs);
the topic's records are read by confluent-kafka and must have the JSON-with-schema shape Confluent's connector
gives them, and the offsets its format. One broker serves the module.
"""

from __future__ import annotations

import base64
import decimal
import json
import sqlite3

import pytest
from confluent_kafka import Consumer as ConfluentConsumer, TopicPartition as ConfluentTopicPartition

from kfk.client import Admin, NewTopic
from kfk.connect.connector import SinkTaskContext
from kfk.connect.connectors.jdbc.sink import JdbcSinkTask
from kfk.connect.data import INT64_SCHEMA, OPTIONAL_STRING_SCHEMA, SchemaBuilder, Struct
from kfk.connect.errors import ConnectException
from kfk.connect.records import SinkRecord
from kfk.testing.broker import start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from kfk.testing.postgres import start_postgres
from tests.connect.workers import start_kfk_worker, wait_for

pytestmark = pytest.mark.integration

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
TIMESTAMP_SCHEMA = {"type": "int64", "optional": False, "name": "org.apache.kafka.connect.data.Timestamp",
                    "version": 1}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = start_broker(tmp_path_factory.mktemp("jdbc-broker"), dict(TEST_OVERRIDES))
    yield process.bootstrap_servers
    process.stop()


def worker_properties(bootstrap: str, offsets_file) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap, "key.converter": JSON_CONVERTER, "value.converter": JSON_CONVERTER,
            "offset.storage.file.filename": str(offsets_file), "offset.flush.interval.ms": "300"}


def create_topic(bootstrap: str, topic: str) -> None:
    """The topic a sink reads, made before its worker starts, so that the sink's consumer does not race the
    source's producer creating it."""
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])


def topic_values(bootstrap: str, topic: str, count: int) -> list[tuple[bytes | None, dict]]:
    """The first `count` records of partition 0 of `topic` read by confluent-kafka: (key bytes, parsed value)."""
    consumer = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": f"jdbc-reader-{topic}",
                                  "enable.auto.commit": False})
    try:
        consumer.assign([ConfluentTopicPartition(topic, 0, 0)])
        messages: list = []
        def enough() -> bool:
            messages.extend(message for message in consumer.consume(count, 1.0) if message.error() is None)
            return len(messages) >= count
        wait_for(enough, f"{count} records on {topic}", timeout=120)
        return [(message.key(), json.loads(message.value())) for message in messages[:count]]
    finally:
        consumer.close()


# --- SQLite ------------------------------------------------------------------------------------------------------

def sqlite_rows(path, table: str) -> list[tuple] | None:
    """The table's rows ordered by id (None while the table does not exist)."""
    with sqlite3.connect(path) as db:
        try:
            return db.execute(f'SELECT id, name, qty, updated FROM "{table}" ORDER BY id').fetchall()
        except sqlite3.OperationalError:
            return None


def test_sqlite_table_to_topic_to_table_with_upserts(broker, tmp_path):
    source_db, sink_db = tmp_path / "source.db", tmp_path / "sink.db"
    with sqlite3.connect(source_db) as db:
        db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, qty INTEGER, "
                   "updated TIMESTAMP NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')))")
        db.executemany("INSERT INTO items (name, qty) VALUES (?, ?)", [("apple", 3), ("pear", None), ("fig", 7)])
    source = {"name": "sqlite-source", "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
              "connection.url": f"jdbc:sqlite:{source_db}", "mode": "timestamp+incrementing",
              "incrementing.column.name": "id", "timestamp.column.name": "updated", "table.whitelist": "items",
              "topic.prefix": "sqlite-", "poll.interval.ms": "200"}
    sink = {"name": "sqlite-sink", "connector.class": "JdbcSinkConnector", "connection.url": f"jdbc:sqlite:{sink_db}",
            "topics": "sqlite-items", "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id",
            "auto.create": "true", "table.name.format": "copy_${topic}"}
    create_topic(broker, sink["topics"])
    worker = start_kfk_worker(tmp_path, worker_properties(broker, tmp_path / "offsets"), [source, sink])
    try:
        wait_for(lambda: sqlite_rows(sink_db, "copy_sqlite-items") == sqlite_rows(source_db, "items"),
                 "the three rows copied")
        with sqlite3.connect(source_db) as db:
            db.execute("UPDATE items SET qty = 4, updated = strftime('%Y-%m-%d %H:%M:%f', 'now') WHERE id = 2")
            db.execute("INSERT INTO items (name, qty) VALUES ('plum', 1)")
        wait_for(lambda: (rows := sqlite_rows(sink_db, "copy_sqlite-items")) is not None and len(rows) == 4
                 and rows == sqlite_rows(source_db, "items"), "the update and the fourth row copied")
        # Confluent's offsets: the last row's id and timestamp (Java's Timestamp: epoch ms and nanos of the second)
        [entry] = wait_for(lambda: [entry for entry in worker.call("GET", "/connectors/sqlite-source/offsets")[1]
                                    ["offsets"] if entry["offset"].get("incrementing") == 4], "the offsets stored")
        assert entry["partition"] == {"protocol": "1", "table": "items"}
        assert set(entry["offset"]) == {"incrementing", "timestamp", "timestamp_nanos"}
        assert entry["offset"]["timestamp"] % 1000 * 1_000_000 == entry["offset"]["timestamp_nanos"]
    finally:
        worker.stop()
    records = topic_values(broker, "sqlite-items", 5)
    assert [value["payload"]["id"] for _, value in records] == [1, 2, 3, 2, 4]  # inserts, then the update in order
    assert [key for key, _ in records] == [None] * 5
    assert records[0][1]["schema"] == {
        "type": "struct", "optional": False, "name": "items",
        "fields": [{"type": "int32", "optional": False, "field": "id"},
                   {"type": "string", "optional": False, "field": "name"},
                   {"type": "int32", "optional": True, "field": "qty"},
                   {**TIMESTAMP_SCHEMA, "field": "updated"}]}
    assert records[3][1]["payload"]["qty"] == 4 and records[1][1]["payload"]["qty"] is None


def test_sqlite_source_resumes_from_its_offsets_after_a_restart(broker, tmp_path):
    database = tmp_path / "counter.db"
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, what TEXT)")
        db.executemany("INSERT INTO events (what) VALUES (?)", [("one",), ("two",), ("three",)])
    source = {"name": "events-source", "connector.class": "JdbcSourceConnector",
              "connection.url": f"jdbc:sqlite:{database}", "mode": "incrementing",
              "incrementing.column.name": "id", "topic.prefix": "restart-", "poll.interval.ms": "200",
              "batch.max.rows": "2"}
    properties = worker_properties(broker, tmp_path / "offsets")
    worker = start_kfk_worker(tmp_path, properties, [source])
    try:
        # config validation: a missing key, and a mode without its column, each an error of its key
        without_url = {key: value for key, value in source.items() if key != "connection.url"}
        status, body = worker.call("PUT", "/connector-plugins/JdbcSourceConnector/config/validate",
                                   {**without_url, "mode": "timestamp"})
        errors = {config["value"]["name"]: config["value"]["errors"] for config in body["configs"]}
        assert status == 200 and body["error_count"] == 1 and errors["connection.url"] != []
        status, body = worker.call("PUT", "/connector-plugins/JdbcSourceConnector/config/validate",
                                   {**source, "mode": "timestamp"})
        errors = {config["value"]["name"]: config["value"]["errors"] for config in body["configs"]}
        assert body["error_count"] == 1 and "timestamp column" in errors["timestamp.column.name"][0]
        wait_for(lambda: worker.call("GET", "/connectors/events-source/offsets")[1]["offsets"] ==
                 [{"partition": {"protocol": "1", "table": "events"}, "offset": {"incrementing": 3}}],
                 "the third row's offset stored")
    finally:
        worker.stop()
    with sqlite3.connect(database) as db:
        db.executemany("INSERT INTO events (what) VALUES (?)", [("four",), ("five",)])
    worker = start_kfk_worker(tmp_path, properties, [source], name="restarted")
    try:
        # a row emitted twice would come before the new ones: the first five records are each row once
        records = topic_values(broker, "restart-events", 5)
    finally:
        worker.stop()
    assert [(value["payload"]["id"], value["payload"]["what"]) for _, value in records] == \
        [(1, "one"), (2, "two"), (3, "three"), (4, "four"), (5, "five")]


# --- PostgreSQL --------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def postgres():
    server = start_postgres()
    yield server
    server.stop()


def postgres_rows(server, table: str) -> list[tuple] | None:
    import psycopg
    with psycopg.connect(server.conninfo, options="-c TimeZone=UTC") as db:
        try:
            return db.execute(f'SELECT id, customer, amount, paid, updated FROM "{table}" ORDER BY id').fetchall()
        except psycopg.errors.UndefinedTable:
            return None


def postgres_execute(server, *statements: str) -> None:
    import psycopg
    with psycopg.connect(server.conninfo, options="-c TimeZone=UTC", autocommit=True) as db:
        for statement in statements:
            db.execute(statement)


def test_postgres_table_to_topic_to_table_upserting_by_key(broker, postgres, tmp_path):
    now = "date_trunc('milliseconds', clock_timestamp() AT TIME ZONE 'UTC')"  # what a Connect Timestamp holds
    postgres_execute(
        postgres,
        "CREATE TABLE orders (id SERIAL PRIMARY KEY, customer TEXT NOT NULL, amount NUMERIC(10, 2), "
        f"paid BOOLEAN NOT NULL DEFAULT false, updated TIMESTAMP NOT NULL DEFAULT {now})",
        "INSERT INTO orders (customer, amount) VALUES ('ada', 12.50), ('bob', NULL), ('cy', 0.99)")
    source = {"name": "pg-source", "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
              "connection.url": postgres.jdbc_url, "mode": "timestamp+incrementing",
              "incrementing.column.name": "id", "timestamp.column.name": "updated",
              "table.include.list": "orders", "topic.prefix": "pg-", "poll.interval.ms": "200",
              "transforms": "key", "transforms.key.type": "org.apache.kafka.connect.transforms.ValueToKey",
              "transforms.key.fields": "id"}
    sink = {"name": "pg-sink", "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
            "connection.url": f"jdbc:postgresql://127.0.0.1:{postgres.port}/postgres",
            "connection.user": "postgres", "connection.password": "unused", "topics": "pg-orders",
            "insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id", "auto.create": "true",
            "table.name.format": "${topic}_copy"}
    create_topic(broker, sink["topics"])
    worker = start_kfk_worker(tmp_path, worker_properties(broker, tmp_path / "offsets"), [source, sink])
    try:
        wait_for(lambda: postgres_rows(postgres, "pg-orders_copy") == postgres_rows(postgres, "orders"),
                 "the three rows copied")
        postgres_execute(postgres, f"UPDATE orders SET paid = true, updated = {now} WHERE id = 1",
                         f"UPDATE orders SET amount = 1.01, updated = {now} WHERE id = 3",
                         "INSERT INTO orders (customer, amount) VALUES ('di', 100)")
        wait_for(lambda: (rows := postgres_rows(postgres, "pg-orders_copy")) is not None and len(rows) == 4
                 and rows == postgres_rows(postgres, "orders"), "the updates and the fourth row copied")
        copied = postgres_rows(postgres, "pg-orders_copy")
        assert copied[0][2:4] == (decimal.Decimal("12.50"), True) and copied[2][2] == decimal.Decimal("1.01")
        [entry] = worker.call("GET", "/connectors/pg-source/offsets")[1]["offsets"]
        assert entry["partition"] == {"protocol": "1", "table": "postgres.public.orders"}
    finally:
        worker.stop()
    records = topic_values(broker, "pg-orders", 6)
    assert [value["payload"]["id"] for _, value in records] == [1, 2, 3, 1, 3, 4]  # in order per key
    assert [json.loads(key) for key, _ in records][0] == {
        "schema": {"type": "struct", "fields": [{"type": "int32", "optional": False, "field": "id"}],
                   "optional": False}, "payload": {"id": 1}}
    first = records[0][1]
    assert first["schema"] == {
        "type": "struct", "optional": False, "name": "orders",
        "fields": [{"type": "int32", "optional": False, "field": "id"},
                   {"type": "string", "optional": False, "field": "customer"},
                   {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
                    "parameters": {"scale": "2"}, "field": "amount"},
                   {"type": "boolean", "optional": False, "field": "paid"},
                   {**TIMESTAMP_SCHEMA, "field": "updated"}]}
    # Decimal: the unscaled value's big-endian two's complement bytes, base64 in JSON
    assert base64.b64decode(first["payload"]["amount"]) == (1250).to_bytes(2, "big")
    assert [value["payload"]["paid"] for _, value in records] == [False, False, False, True, False, False]


def test_sink_keyed_by_a_primitive_key_upserts_and_deletes_on_tombstones(tmp_path):
    """The sink task on its own (no worker): pk.mode record_key with a primitive key, delete.enabled."""
    schema = SchemaBuilder.struct().name("user").field("email", OPTIONAL_STRING_SCHEMA).build()
    def record(key, email, offset):
        value = None if email is None else Struct(schema).put("email", email)
        return SinkRecord("users", 0, INT64_SCHEMA, key, schema if email else None, value, kafka_offset=offset)
    config = {"connection.url": f"jdbc:sqlite:{tmp_path / 'users.db'}", "insert.mode": "upsert",
              "pk.mode": "record_key", "pk.fields": "user_id", "auto.create": "true", "delete.enabled": "true"}
    task = JdbcSinkTask()
    task.initialize(SinkTaskContext(config))
    task.start(config)
    try:
        task.put([record(1, "a@x", 0), record(2, "b@x", 1), record(1, "a2@x", 2), record(2, None, 3),
                  record(3, "c@x", 4)])
        with sqlite3.connect(tmp_path / "users.db") as db:
            assert db.execute("SELECT user_id, email FROM users ORDER BY user_id").fetchall() == \
                [(1, "a2@x"), (3, "c@x")]
    finally:
        task.stop()
    task = JdbcSinkTask()
    task.start({**config, "pk.fields": ""})
    try:
        with pytest.raises(ConnectException, match="Need exactly one PK column defined since the key schema for "
                                                   "records is a primitive type, defined columns are: \\[\\]"):
            task.put([record(4, "d@x", 5)])
    finally:
        task.stop()
