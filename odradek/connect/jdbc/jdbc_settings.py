"""The JDBC connectors' configuration keys, with Confluent's names, defaults and meanings.

``SOURCE_CONFIGS`` and ``SINK_CONFIGS`` are tables of ``ConfigDef`` (odradek.config_def), so the
same definitions parse a connector's properties, answer the REST validate endpoint and document
the keys. ``parse`` returns typed values for the keys of a table (keys outside it — ``name``,
``connector.class``, ``transforms``… — belong to the worker and are left alone) and raises
``ConfigException`` naming the first bad key; ``problems`` lists every bad key for validation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from odradek.config_def import (
    BOOL,
    INT,
    LIST,
    LONG,
    PASSWORD,
    STR,
    AtLeast,
    ConfigDef,
    ConfigError,
    OneOf,
    config_table,
)
from odradek.connect.jdbc.connector_support import check
from odradek.connect.jdbc.connector_support import parse as parse_checked
from odradek.connect.jdbc.jdbc_queries import INCREMENTING, MODES, TIMESTAMP, TIMESTAMP_INCREMENTING
from odradek.connect.jdbc.jdbc_url import parse_connection_url

CONNECTION_CONFIGS = (
    ConfigDef("connection.url", STR, doc="jdbc:postgresql://host:port/database or jdbc:sqlite:path."),
    ConfigDef("connection.user", STR, doc="The database user (wins over one in the URL)."),
    ConfigDef("connection.password", PASSWORD, doc="The database user's password."),
    ConfigDef(
        "connection.attempts",
        INT,
        3,
        AtLeast(1),
        doc="How many times to try connecting before the task fails.",
    ),
    ConfigDef("connection.backoff.ms", LONG, 10_000, AtLeast(0), doc="Wait between connection attempts."),
)

SOURCE_CONFIGS = config_table(
    *CONNECTION_CONFIGS,
    ConfigDef("mode", STR, None, OneOf(*MODES), doc="How each poll finds new rows."),
    ConfigDef("incrementing.column.name", STR, "", doc="A strictly increasing column (incrementing modes)."),
    ConfigDef(
        "timestamp.column.name", LIST, [], doc="Modification timestamp column(s); several read as COALESCE."
    ),
    ConfigDef(
        "timestamp.delay.interval.ms",
        LONG,
        0,
        AtLeast(0),
        doc="Read a row only once its timestamp is this much older than the database's clock.",
    ),
    ConfigDef("table.whitelist", LIST, [], doc="Tables to copy (all others are skipped)."),
    ConfigDef("table.include.list", LIST, [], doc="Newer name of table.whitelist."),
    ConfigDef("table.blacklist", LIST, [], doc="Tables not to copy."),
    ConfigDef("table.exclude.list", LIST, [], doc="Newer name of table.blacklist."),
    ConfigDef("query", STR, "", doc="Copy the result of this query instead of tables."),
    ConfigDef(
        "topic.prefix", STR, None, doc="Topic = prefix + table name (or the prefix alone, with query)."
    ),
    ConfigDef("poll.interval.ms", INT, 5000, AtLeast(1), doc="How often each table is polled for new rows."),
    ConfigDef("batch.max.rows", INT, 100, AtLeast(1), doc="Rows per poll, at most, from one table."),
    ConfigDef(
        "table.poll.interval.ms",
        LONG,
        60_000,
        AtLeast(1),
        doc="How often the connector looks for added or removed tables and reassigns the tasks.",
    ),
    ConfigDef("tables", LIST, [], doc="(Set by the connector for each task: the tables it reads.)"),
)

SINK_CONFIGS = config_table(
    *CONNECTION_CONFIGS,
    ConfigDef(
        "insert.mode", STR, "insert", OneOf("insert", "upsert", "update"), doc="How records are written."
    ),
    ConfigDef(
        "pk.mode",
        STR,
        "none",
        OneOf("none", "kafka", "record_key", "record_value"),
        doc="Where the primary key comes from.",
    ),
    ConfigDef("pk.fields", LIST, [], doc="Primary key column(s); the default depends on pk.mode."),
    ConfigDef("fields.whitelist", LIST, [], doc="Value fields to write (all when empty)."),
    ConfigDef("auto.create", BOOL, False, doc="CREATE TABLE when the destination table is missing."),
    ConfigDef("auto.evolve", BOOL, False, doc="ALTER TABLE ADD columns for new optional fields."),
    ConfigDef(
        "delete.enabled",
        BOOL,
        False,
        doc="A tombstone (null value) deletes the row; needs pk.mode=record_key.",
    ),
    ConfigDef("table.name.format", STR, "${topic}", doc="Destination table; ${topic} is the record's topic."),
    ConfigDef("batch.size", INT, 3000, AtLeast(1), doc="Rows per batched statement, at most."),
    ConfigDef("max.retries", INT, 10, AtLeast(0), doc="Retries of a failed write before the task fails."),
    ConfigDef("retry.backoff.ms", INT, 3000, AtLeast(0), doc="Wait before retrying a failed write."),
)


def problems(table: Mapping[str, ConfigDef], props: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every (key, message) wrong in ``props`` against ``table``, plus the connectors' own rules."""
    return check(table, props, lambda values: _rules(table, values))


def parse(table: Mapping[str, ConfigDef], props: Mapping[str, Any]) -> dict[str, Any]:
    return parse_checked(table, props, lambda values: _rules(table, values))


def _rules(table: Mapping[str, ConfigDef], v: dict[str, Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    try:
        parse_connection_url(v["connection.url"], v["connection.user"], v["connection.password"])
    except ConfigError as bad:
        out.append(("connection.url", str(bad)))
    if table is SOURCE_CONFIGS:
        out += _source_rules(v)
    else:
        out += _sink_rules(v)
    return out


def _source_rules(v: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    mode = v["mode"]
    if mode is None:
        out.append(("mode", f"mode: required; one of {', '.join(MODES)}"))
    if v["topic.prefix"] is None:
        out.append(
            ("topic.prefix", "topic.prefix: required (the topic is the prefix followed by the table name)")
        )
    if mode in (INCREMENTING, TIMESTAMP_INCREMENTING) and not v["incrementing.column.name"]:
        out.append(("incrementing.column.name", f"incrementing.column.name: required with mode={mode}"))
    if mode in (TIMESTAMP, TIMESTAMP_INCREMENTING) and not v["timestamp.column.name"]:
        out.append(("timestamp.column.name", f"timestamp.column.name: required with mode={mode}"))
    include = v["table.whitelist"] or v["table.include.list"]
    exclude = v["table.blacklist"] or v["table.exclude.list"]
    if include and exclude:
        out.append(
            ("table.blacklist", "table.blacklist: give either table.whitelist or table.blacklist, not both")
        )
    if v["query"] and (include or exclude):
        out.append(
            ("query", "query: reads one query; leave table.whitelist and table.blacklist unset with it")
        )
    return out


def _sink_rules(v: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    if v["delete.enabled"] and v["pk.mode"] != "record_key":
        out.append(
            ("delete.enabled", "delete.enabled: deletes need pk.mode=record_key (the key names the row)")
        )
    if v["insert.mode"] in ("upsert", "update") and v["pk.mode"] == "none":
        out.append(("pk.mode", f"pk.mode: insert.mode={v['insert.mode']} needs a primary key; set pk.mode"))
    if v["pk.mode"] == "kafka" and v["pk.fields"] and len(v["pk.fields"]) != 3:
        out.append(
            ("pk.fields", "pk.fields: with pk.mode=kafka, name three columns (topic, partition, offset)")
        )
    return out
