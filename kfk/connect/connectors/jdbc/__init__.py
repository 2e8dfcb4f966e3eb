"""JDBC-style source and sink connectors (Confluent's JdbcSourceConnector / JdbcSinkConnector configs and records)
for SQLite (Python's sqlite3) and PostgreSQL (psycopg, the `connect-jdbc` extra)."""
