"""The JDBC source's queries per mode, and its offsets as Confluent's connector stores them.

Modes (Confluent's ``mode``):

- ``bulk``: the whole table (or query) on every poll.
- ``incrementing``: rows whose strictly increasing column passed the last one seen:
  ``WHERE inc > ? ORDER BY inc``.
- ``timestamp``: rows whose timestamp passed the last one seen and lies before now minus
  ``timestamp.delay.interval.ms``: ``WHERE ts > ? AND ts < ? ORDER BY ts``.
- ``timestamp+incrementing``: both, so rows sharing a timestamp are not lost:
  ``WHERE ts < ? AND ((ts = ? AND inc > ?) OR ts > ?) ORDER BY ts, inc``.

Several ``timestamp.column.name`` columns read as ``COALESCE(a, b, …)``. A ``query`` is wrapped
as a subquery so that the criteria apply to its result whatever it contains.

The offset of a source partition (``{"table": name}`` or ``{"query": "query"}``) is
``{"incrementing": n}`` and/or ``{"timestamp": epoch millis, "timestamp_nanos": nanos of the
second}`` — the same map Confluent's ``TimestampIncrementingOffset`` writes, so offsets read the
same in the offsets topic and a task resumes from them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from odradek.connect.jdbc.jdbc_dialects import Dialect

BULK = "bulk"
INCREMENTING = "incrementing"
TIMESTAMP = "timestamp"
TIMESTAMP_INCREMENTING = "timestamp+incrementing"
MODES = (BULK, INCREMENTING, TIMESTAMP, TIMESTAMP_INCREMENTING)

EPOCH = dt.datetime(1970, 1, 1)
QUERY_PARTITION = {"query": "query"}


def table_partition(table: str) -> dict[str, str]:
    return {"table": table}


@dataclass(frozen=True)
class Offset:
    """Where a table's reading stands: the last incrementing value and/or timestamp read."""

    incrementing: int | None = None
    timestamp: dt.datetime | None = None  # UTC, no tzinfo
    nanos: int | None = None  # nanoseconds of the second, when finer than microseconds

    def to_map(self) -> dict[str, int]:
        out: dict[str, int] = {}
        if self.incrementing is not None:
            out["incrementing"] = self.incrementing
        if self.timestamp is not None:
            delta = self.timestamp - EPOCH
            millis = delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000
            out["timestamp"] = millis
            out["timestamp_nanos"] = (
                self.nanos if self.nanos is not None else self.timestamp.microsecond * 1000
            )
        return out

    @classmethod
    def from_map(cls, stored: dict[str, Any] | None) -> Offset:
        if not stored:
            return cls()
        incrementing = stored.get("incrementing")
        millis = stored.get("timestamp")
        timestamp = nanos = None
        if millis is not None:
            nanos = stored.get("timestamp_nanos")
            seconds = int(millis) // 1000
            micros = int(nanos) // 1000 if nanos is not None else (int(millis) % 1000) * 1000
            timestamp = EPOCH + dt.timedelta(seconds=seconds, microseconds=micros)
        return cls(None if incrementing is None else int(incrementing), timestamp, nanos)


@dataclass(frozen=True)
class QuerySpec:
    """What one source partition reads: a table or a query, in a mode."""

    mode: str
    table: str | None = None
    query: str | None = None
    incrementing_column: str | None = None
    timestamp_columns: Sequence[str] = ()

    @property
    def partition(self) -> dict[str, str]:
        return QUERY_PARTITION if self.query is not None else table_partition(self.table or "")

    def uses_timestamp(self) -> bool:
        return self.mode in (TIMESTAMP, TIMESTAMP_INCREMENTING)

    def uses_incrementing(self) -> bool:
        return self.mode in (INCREMENTING, TIMESTAMP_INCREMENTING)


def build_select(dialect: Dialect, spec: QuerySpec) -> str:
    if spec.query is not None:
        source = f"SELECT * FROM ({spec.query}) AS odradek_query"
    else:
        source = f"SELECT * FROM {dialect.table_ref(spec.table or '')}"
    p = dialect.placeholder
    inc = dialect.quote(spec.incrementing_column or "")
    ts = _timestamp_expression(dialect, spec.timestamp_columns)
    if spec.mode == INCREMENTING:
        return f"{source} WHERE {inc} > {p} ORDER BY {inc} ASC"
    if spec.mode == TIMESTAMP:
        return f"{source} WHERE {ts} > {p} AND {ts} < {p} ORDER BY {ts} ASC"
    if spec.mode == TIMESTAMP_INCREMENTING:
        return f"{source} WHERE {ts} < {p} AND (({ts} = {p} AND {inc} > {p}) OR {ts} > {p}) ORDER BY {ts}, {inc} ASC"
    return source


def query_parameters(dialect: Dialect, spec: QuerySpec, offset: Offset, end: dt.datetime | None) -> list[Any]:
    """The parameters of ``build_select`` for reading on from ``offset`` up to ``end``."""
    last_inc = offset.incrementing if offset.incrementing is not None else -1
    begin = dialect.to_db("timestamp", offset.timestamp or EPOCH)
    end_value = dialect.to_db("timestamp", end)
    if spec.mode == INCREMENTING:
        return [last_inc]
    if spec.mode == TIMESTAMP:
        return [begin, end_value]
    if spec.mode == TIMESTAMP_INCREMENTING:
        return [end_value, begin, last_inc, begin]
    return []


def offset_after(spec: QuerySpec, previous: Offset, row: dict[str, Any]) -> Offset:
    """The offset once ``row`` (column name → value, as read) has been delivered."""
    if spec.mode == BULK:
        return previous
    incrementing = previous.incrementing
    if spec.uses_incrementing():
        value = row.get(spec.incrementing_column or "")
        if value is None:
            raise ValueError(f"incrementing column {spec.incrementing_column!r} is null or missing in a row")
        incrementing = int(value)
    timestamp, nanos = previous.timestamp, previous.nanos
    if spec.uses_timestamp():
        found = next((row[c] for c in spec.timestamp_columns if row.get(c) is not None), None)
        if found is not None:
            timestamp, nanos = found, None
    return Offset(incrementing, timestamp, nanos)


def _timestamp_expression(dialect: Dialect, columns: Sequence[str]) -> str:
    if len(columns) == 1:
        return dialect.comparable_timestamp(dialect.quote(columns[0]))
    return dialect.comparable_timestamp("COALESCE(" + ", ".join(dialect.quote(c) for c in columns) + ")")
