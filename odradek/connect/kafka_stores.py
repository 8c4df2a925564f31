"""Kafka Connect's three internal topics as Odradek keeps them (Kafka's ``KafkaConfigBackingStore``,
``KafkaOffsetBackingStore`` and ``KafkaStatusBackingStore``), as plain JSON like Kafka's internal converter.

Config topic (one partition): ``connector-<name>`` → ``{"properties": {...}}`` (null: deleted),
``task-<name>-<n>`` → ``{"properties": {...}}``, ``commit-<name>`` → ``{"tasks": n}`` (the task
configs written before it take effect), ``target-state-<name>`` → ``{"state": "STARTED"|"PAUSED",
"state.v2": "STARTED"|"PAUSED"|"STOPPED"}``, ``restart-connector-<name>`` → ``{"include-tasks": b,
"only-failed": b}``, ``task-count-record-<name>`` → ``{"task-count": n}`` (KIP-618: the producers of the
connector's earlier tasks are fenced; until then ``fenced_counts`` holds how many to fence). Status topic: ``status-connector-<name>`` / ``status-task-<name>-<n>`` →
``{"state", "trace", "worker_id", "generation"}``. Offset topic: ``["<connector>", {partition}]`` →
the offset. ``ConfigState`` applies config records in order; ``KafkaOffsetStore`` is the
worker's offset store over the offset topic. Owned by the event loop.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from odradek.connect.offset_store import OffsetStore, offset_key
from odradek.connect.topic_log import TopicLog

STATE_TO_TARGET = {"STARTED": "RUNNING", "PAUSED": "PAUSED", "STOPPED": "STOPPED"}
TARGET_TO_STATE = {v: k for k, v in STATE_TO_TARGET.items()}

_TASK_KEY = re.compile(r"^task-(.+)-(\d+)$")


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def loads(data: bytes | None) -> Any:
    return None if data is None else json.loads(data)


def target_state_value(target: str) -> dict[str, str]:
    state = TARGET_TO_STATE[target]
    # Workers before KIP-875 know STARTED and PAUSED only: STOPPED reads as PAUSED to them.
    return {"state": "PAUSED" if state == "STOPPED" else state, "state.v2": state}


class ConfigState:
    """Connectors, target states and committed task configs, as the config topic says so far."""

    def __init__(self) -> None:
        self.connectors: dict[str, dict[str, str]] = {}
        self.targets: dict[str, str] = {}
        self.tasks: dict[str, list[dict[str, str]]] = {}
        self.task_counts: dict[str, int] = {}  # the task count of each source connector's last fencing
        self.fenced_counts: dict[str, int] = {}  # task configs committed since: how many tasks to fence
        self._pending: dict[str, dict[int, dict[str, str]]] = {}
        self.offset = 0  # records read: the config offset workers compare

    def apply(self, key: str, value: Any) -> tuple[str, str] | None:
        """Apply one record; ``(kind, connector)`` of the change, or None."""
        self.offset += 1
        if key.startswith("connector-"):
            name = key[len("connector-"):]
            if value is None:
                self.connectors.pop(name, None)
                self.targets.pop(name, None)
                self.tasks.pop(name, None)
                self.task_counts.pop(name, None)
                self.fenced_counts.pop(name, None)
            else:
                self.connectors[name] = dict(value.get("properties") or {})
                self.targets.setdefault(name, "RUNNING")
            return "connector", name
        if key.startswith("target-state-"):
            name = key[len("target-state-"):]
            if value is not None:
                state = value.get("state.v2") or value.get("state") or "STARTED"
                self.targets[name] = STATE_TO_TARGET.get(state, "RUNNING")
            return "target", name
        if key.startswith("commit-"):
            name = key[len("commit-"):]
            count = int((value or {}).get("tasks", 0))
            pending = self._pending.pop(name, {})
            old = self.tasks.get(name, [])
            self.tasks[name] = [pending.get(i) or (old[i] if i < len(old) else {}) for i in range(count)]
            self.fenced_counts[name] = max(self.fenced_counts.get(name, 0), self.task_counts.get(name, 0), len(old))
            return "commit", name
        if key.startswith("task-count-record-"):
            name = key[len("task-count-record-"):]
            if value is not None:
                self.task_counts[name] = int(value.get("task-count", 0))
                self.fenced_counts.pop(name, None)
            return "fenced", name
        match = _TASK_KEY.match(key)
        if match and value is not None:
            self._pending.setdefault(match.group(1), {})[int(match.group(2))] = dict(value.get("properties") or {})
            return None
        if key.startswith("restart-connector-"):
            return "restart", key[len("restart-connector-"):]
        return None


class KafkaOffsetStore(OffsetStore):
    """With ``exactly_once_group`` (``exactly.once.source.support=enabled``) source tasks write their
    offsets in their own transactions (``offset_records``), under the transactional id
    ``<group.id>-<connector>-<task>`` as Kafka's workers do."""

    def __init__(self, exactly_once_group: str | None = None) -> None:
        super().__init__()
        self.log: TopicLog | None = None
        self.exactly_once_group = exactly_once_group

    @property
    def topic(self) -> str:
        assert self.log is not None
        return self.log.topic

    def transactional_id(self, connector: str, task: int) -> str | None:
        return None if self.exactly_once_group is None else f"{self.exactly_once_group}-{connector}-{task}"

    def offset_records(self, connector: str, offsets: Iterable[tuple[Mapping[str, Any], Any]]):
        return [(offset_key(connector, p).encode(), None if o is None else dumps(o)) for p, o in offsets]

    async def remember(self, connector: str, offsets: list[tuple[Mapping[str, Any], Any]]) -> None:
        """The local view of offsets a transaction has just written."""
        await super().write(connector, offsets)

    def on_record(self, key: bytes | None, value: bytes | None) -> None:
        if key is not None:
            self.load_entry(key.decode(), loads(value))

    async def write(self, connector: str, offsets: Iterable[tuple[Mapping[str, Any], Any]]) -> None:
        pairs = list(offsets)
        assert self.log is not None
        await self.log.send_many(self.offset_records(connector, pairs))
        await super().write(connector, pairs)
