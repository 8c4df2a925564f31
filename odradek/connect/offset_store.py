"""Source offsets: where each source partition's task got to, as Kafka's offset stores keep them.

A key is the JSON ``["<connector>", {<source partition>}]`` and a value the JSON offset (null:
deleted), as Kafka's internal converter writes them. ``FileOffsetStore`` (standalone mode,
``offset.storage.file.filename``) keeps them in a JSON file, rewritten atomically (temporary
file, fsync, rename) at each commit, so a kill -9 leaves the last commit or the one before.

One owner (the worker's loop) writes; readers on task threads see whole dicts only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from odradek.connect.api import OffsetStorageReader


def offset_key(connector: str, partition: Mapping[str, Any]) -> str:
    return json.dumps([connector, partition], separators=(",", ":"))


def _lookup_key(connector: str, partition: Mapping[str, Any]) -> str:
    return json.dumps([connector, partition], sort_keys=True, separators=(",", ":"))


class OffsetStore:
    """Offsets in memory, by key; subclasses make them durable."""

    def __init__(self) -> None:
        self.data: dict[str, tuple[str, Any]] = {}  # lookup key -> (written key, offset)

    def load_entry(self, key: str, value: Any) -> None:
        try:
            connector, partition = json.loads(key)
        except (ValueError, TypeError):
            return  # not a Connect offset key: ignored, as Kafka ignores it
        lookup = _lookup_key(connector, partition)
        if value is None:
            self.data.pop(lookup, None)
        else:
            self.data[lookup] = (key, value)

    def get(self, connector: str, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        entry = self.data.get(_lookup_key(connector, partition))
        return entry[1] if entry else None

    def connector_offsets(self, connector: str) -> list[tuple[dict, dict]]:
        out = []
        for key, value in self.data.values():
            name, partition = json.loads(key)
            if name == connector:
                out.append((partition, value))
        return out

    async def write(self, connector: str, offsets: Iterable[tuple[Mapping[str, Any], Any]]) -> None:
        for partition, offset in offsets:
            self.load_entry(offset_key(connector, partition), offset)

    def reader(self, connector: str) -> OffsetStorageReader:
        return _Reader(self, connector)


class _Reader(OffsetStorageReader):
    def __init__(self, store: OffsetStore, connector: str):
        self.store, self.connector = store, connector

    def offsets(self, partitions):
        return [self.store.get(self.connector, p) for p in partitions]


class FileOffsetStore(OffsetStore):
    def __init__(self, path: str):
        super().__init__()
        self.path = Path(path)
        if self.path.exists() and self.path.stat().st_size:
            for key, value in json.loads(self.path.read_text()):
                self.load_entry(key, value)

    async def write(self, connector, offsets) -> None:
        await super().write(connector, offsets)
        self._save()

    def _save(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as out:
            json.dump([[key, value] for key, value in self.data.values()], out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
