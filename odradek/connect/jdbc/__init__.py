"""Confluent-compatible JDBC source and sink connectors for PostgreSQL (psycopg 3) and SQLite.

``JdbcSourceConnector`` copies tables (or a query) to topics; ``JdbcSinkConnector`` writes topics
to tables. Both read Confluent's configuration keys, so an existing connector config carries
over with its ``connection.url``. See docs/connect-jdbc.md.
"""

from odradek.connect.jdbc.jdbc_sink import JdbcSinkConnector, JdbcSinkTask
from odradek.connect.jdbc.jdbc_source import JdbcSourceConnector, JdbcSourceTask

__all__ = ["JdbcSinkConnector", "JdbcSinkTask", "JdbcSourceConnector", "JdbcSourceTask"]
