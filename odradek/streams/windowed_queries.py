"""Interactive queries on windowed stores: ``KafkaStreams.store(name)`` on a ``windowed_by(...)``
aggregation materialized as ``name`` gives Kafka's ``ReadOnlyWindowStore`` (time windows) or
``ReadOnlySessionStore`` (session windows).

As for key-value stores (interactive_queries.py), the answers come from the store's changelog topic
(``<application.id>-<store>-changelog``), caught up to its end at each call, so they are as fresh
as the last committed micro-batch. The changelog's keys are the window store's:

- time windows: the key's bytes, the window start (8-byte big-endian), a 4-byte sequence number;
  the end is the start plus the window size;
- session windows: the key's bytes, the session end, the session start (8 bytes each); a session
  merged into a larger one is deleted by a tombstone, so only live sessions are answered.

Times are milliseconds since the epoch; bounds are inclusive, as in Kafka. Results spanning keys
come ordered by window start, then by serialized key (Kafka's segments are in time order); one
key's windows by start.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any, NamedTuple

from odradek.streams.interactive_queries import ChangelogTable, ReadOnlyKeyValueStore, StoreEntry, key_bytes
from odradek.streams.serdes import Serde
from odradek.streams.windowed import SessionWindowedSerde, TimeWindowedSerde, Window, Windowed

_LONG = struct.Struct(">q")
_TWO_LONGS = struct.Struct(">qq")
_SEQUENCE = 4  # the time-window store key's trailing sequence number
_MAX_LONG = 2**63 - 1


class _Row(NamedTuple):
    key: bytes
    start: int
    end: int
    value: bytes


class _WindowedChangelog:
    def __init__(
        self,
        name: str,
        changelog: str,
        key_serde: Serde,
        value_serde: Serde,
        client_options: dict[str, str],
        read_committed: bool,
    ):
        self.name = name
        self.changelog = changelog
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._table = ChangelogTable(name, changelog, client_options, read_committed)

    def _split(self, store_key: bytes) -> tuple[bytes, int, int]:
        raise NotImplementedError

    def _rows(self, key: Any = None) -> list[_Row]:
        """The live windows (of ``key`` only, unless None), by start then serialized key."""
        wanted = None if key is None else key_bytes(self.key_serde, self.changelog, key)
        rows = []
        for store_key, value in self._table.latest().items():
            inner, start, end = self._split(bytes(store_key))
            if wanted is None or inner == wanted:
                rows.append(_Row(inner, start, end, bytes(value)))
        return sorted(rows, key=lambda row: (row.start, row.key))

    def _value(self, row: _Row) -> Any:
        return self.value_serde.deserialize(self.changelog, row.value)

    def _windowed(self, row: _Row) -> StoreEntry:
        key = self.key_serde.deserialize(self.changelog, row.key)
        return StoreEntry(Windowed(key, Window(row.start, row.end)), self._value(row))


class ReadOnlyWindowStore(_WindowedChangelog):
    """Kafka's ``ReadOnlyWindowStore`` on a time-windowed aggregation:

    - ``fetch(key, window_start)``: the value of ``key``'s window starting then, or None;
    - ``fetch(key, time_from, time_to)``: ``key``'s windows starting in [time_from, time_to] as
      ``(window start, value)`` entries;
    - ``fetch_range(key_from, key_to, time_from, time_to)``, ``fetch_all(time_from, time_to)``,
      ``all()``: ``(Windowed(key, Window(start, end)), value)`` entries.
    """

    def __init__(
        self, name, changelog, key_serde, value_serde, client_options, read_committed, *, size_ms: int
    ):
        super().__init__(name, changelog, key_serde, value_serde, client_options, read_committed)
        self.size_ms = size_ms

    def fetch(self, key: Any, time_from: int, time_to: int | None = None) -> Any:
        if time_to is None:
            row = next((r for r in self._rows(key) if r.start == time_from), None)
            return None if row is None else self._value(row)
        return iter(
            [StoreEntry(r.start, self._value(r)) for r in self._rows(key) if time_from <= r.start <= time_to]
        )

    def fetch_range(self, key_from: Any, key_to: Any, time_from: int, time_to: int) -> Iterator[StoreEntry]:
        """The windows of keys in [key_from, key_to] (serialized order; None: unbounded) starting
        in [time_from, time_to]."""
        low = None if key_from is None else key_bytes(self.key_serde, self.changelog, key_from)
        high = None if key_to is None else key_bytes(self.key_serde, self.changelog, key_to)
        return iter(
            [
                self._windowed(r)
                for r in self._rows()
                if time_from <= r.start <= time_to
                and (low is None or r.key >= low)
                and (high is None or r.key <= high)
            ]
        )

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[StoreEntry]:
        return self.fetch_range(None, None, time_from, time_to)

    def all(self) -> Iterator[StoreEntry]:
        return iter([self._windowed(r) for r in self._rows()])

    def _split(self, store_key: bytes) -> tuple[bytes, int, int]:
        (start,) = _LONG.unpack_from(store_key, len(store_key) - _SEQUENCE - _LONG.size)
        return store_key[: -_SEQUENCE - _LONG.size], start, min(start + self.size_ms, _MAX_LONG)


class ReadOnlySessionStore(_WindowedChangelog):
    """Kafka's ``ReadOnlySessionStore`` on a session-windowed aggregation:

    - ``fetch(key)``: ``key``'s sessions as ``(Windowed(key, Window(start, end)), value)`` entries;
    - ``fetch_session(key, session_start, session_end)``: that session's value, or None;
    - ``find_sessions(key, earliest_session_end, latest_session_start)``: ``key``'s sessions that
      end at or after the one and start at or before the other.
    """

    def fetch(self, key: Any) -> Iterator[StoreEntry]:
        return iter([self._windowed(r) for r in self._rows(key)])

    def fetch_session(self, key: Any, session_start: int, session_end: int) -> Any:
        row = next((r for r in self._rows(key) if (r.start, r.end) == (session_start, session_end)), None)
        return None if row is None else self._value(row)

    def find_sessions(
        self, key: Any, earliest_session_end: int, latest_session_start: int
    ) -> Iterator[StoreEntry]:
        return iter(
            [
                self._windowed(r)
                for r in self._rows(key)
                if r.end >= earliest_session_end and r.start <= latest_session_start
            ]
        )

    def _split(self, store_key: bytes) -> tuple[bytes, int, int]:
        end, start = _TWO_LONGS.unpack_from(store_key, len(store_key) - _TWO_LONGS.size)
        return store_key[: -_TWO_LONGS.size], start, end


def open_store(
    name: str,
    changelog: str,
    key_serde: Serde,
    value_serde: Serde,
    client_options: dict[str, str],
    read_committed: bool,
) -> ReadOnlyKeyValueStore | ReadOnlyWindowStore | ReadOnlySessionStore:
    """The read-only store of the kind the store's keys say: windowed keys give a window or a
    session store (on the inner key), plain keys a key-value store."""
    if isinstance(key_serde, TimeWindowedSerde):
        return ReadOnlyWindowStore(
            name, changelog, key_serde.inner, value_serde, client_options, read_committed,
            size_ms=key_serde.window_size_ms,
        )  # fmt: skip
    if isinstance(key_serde, SessionWindowedSerde):
        return ReadOnlySessionStore(
            name, changelog, key_serde.inner, value_serde, client_options, read_committed
        )
    return ReadOnlyKeyValueStore(name, changelog, key_serde, value_serde, client_options, read_committed)
