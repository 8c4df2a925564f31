"""Interactive queries: ``KafkaStreams.store("name")`` answers key lookups and range scans on a
materialized table, as Kafka's ``ReadOnlyKeyValueStore`` does.

The table's state lives in Spark's state store, inside the query's checkpoint, where only the
query's own tasks may read it while it runs. What it holds is also in the store's changelog
topic (``<application.id>-<store>-changelog``), written by every micro-batch together with the
table's outputs. A ``ReadOnlyKeyValueStore`` reads that topic: each call first catches up from
where the previous call stopped to the topic's current end (the last stable offset under
exactly-once, so an aborted micro-batch is never seen), keeping the latest value per key and
dropping a key at its tombstone. Answers are therefore as fresh as the last committed micro-batch
(one ``commit.interval.ms``), from the driver or any other process, with no Spark job per call.
A store written without a changelog (``with_logging_disabled()``) cannot be queried.
Windowed stores (``windowed_by(...)`` aggregations) are read the same way: windowed_queries.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, NamedTuple

from odradek.streams.serdes import Serde


class InvalidStateStoreException(RuntimeError):
    """The store cannot be queried: no such store, not queryable, or the app is not running
    (Kafka's InvalidStateStoreException)."""


class StoreEntry(NamedTuple):
    """One entry of a range: ``.key`` and ``.value`` as Kafka's KeyValue, and a (key, value) pair."""

    key: Any
    value: Any


class ChangelogTable:
    """A changelog topic read into a table of its latest bytes per key (tombstones delete); each
    ``latest()`` first catches up from where the previous call stopped to the topic's end."""

    def __init__(self, store: str, changelog: str, client_options: dict[str, str], read_committed: bool):
        from odradek.pipeline.options import read_options

        self.store = store
        self.changelog = changelog
        self._opts = read_options(
            {
                **client_options,
                "subscribe": changelog,
                "failOnDataLoss": "false",
                "kafka.isolation.level": "read_committed" if read_committed else "read_uncommitted",
            },
            streaming=False,
        )
        self._table: dict[bytes, bytes] = {}
        self._positions: dict[int, int] = {}
        self._lock = threading.Lock()

    def latest(self) -> dict[bytes, bytes]:
        """The table after everything the changelog holds now; a snapshot for this call."""
        from odradek.pipeline.blocking_client import LATEST
        from odradek.pipeline.reader import RangePartition, read_range

        opts = self._opts
        with self._lock:
            with opts.cluster() as cluster:
                partitions = cluster.topic_partitions([self.changelog], refresh=True).get(self.changelog)
                if partitions is None:
                    raise InvalidStateStoreException(
                        f"state store {self.store}: its changelog topic {self.changelog} is gone"
                    )
                ends = cluster.offsets(
                    [(self.changelog, p) for p in partitions], LATEST, isolation_level=opts.isolation_level
                )
            for (_, partition), end in ends.items():
                start = self._positions.get(partition, 0)
                if end > start:
                    for batch in read_range(RangePartition(self.changelog, partition, start, end), opts):
                        columns = batch.to_pydict()
                        for key, value in zip(columns["key"], columns["value"], strict=True):
                            if key is None:
                                continue
                            if value is None:
                                self._table.pop(key, None)
                            else:
                                self._table[key] = value
                self._positions[partition] = max(start, end)
            return dict(self._table)


class ReadOnlyKeyValueStore:
    """``get(key)``, ``range(from_key, to_key)``, ``all()``, ``approximate_num_entries()``;
    ranges and ``all()`` in the order of the serialized keys, as Kafka's RocksDB stores."""

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
        self._changelog = ChangelogTable(name, changelog, client_options, read_committed)

    # -- Kafka's ReadOnlyKeyValueStore ------------------------------------------------------
    def get(self, key: Any) -> Any:
        data = self._latest().get(self._key_bytes(key))
        return None if data is None else self.value_serde.deserialize(self.changelog, data)

    def range(self, from_key: Any = None, to_key: Any = None) -> Iterator[StoreEntry]:
        """The entries with ``from_key <= key <= to_key`` (None: unbounded on that side)."""
        low = None if from_key is None else self._key_bytes(from_key)
        high = None if to_key is None else self._key_bytes(to_key)
        return iter(
            [
                self._entry(k, v)
                for k, v in sorted(self._latest().items())
                if (low is None or k >= low) and (high is None or k <= high)
            ]
        )

    def all(self) -> Iterator[StoreEntry]:
        return self.range()

    def approximate_num_entries(self) -> int:
        return len(self._latest())

    # -- reading the changelog ----------------------------------------------------------------
    def _key_bytes(self, key: Any) -> bytes:
        return key_bytes(self.key_serde, self.changelog, key)

    def _entry(self, key: bytes, value: bytes) -> StoreEntry:
        return StoreEntry(
            self.key_serde.deserialize(self.changelog, key),
            self.value_serde.deserialize(self.changelog, value),
        )

    def _latest(self) -> dict[bytes, bytes]:
        return self._changelog.latest()


def key_bytes(serde: Serde, topic: str, key: Any) -> bytes:
    """A store key serialized; a None key is refused (Kafka's stores refuse null keys)."""
    data = None if key is None else serde.serialize(topic, key)
    if data is None:
        raise ValueError("a store key cannot be None")
    return data
