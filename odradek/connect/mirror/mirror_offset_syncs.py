"""Offset syncs: written by the mirror source task, read to translate group offsets.

``OffsetSyncWriter`` decides when a partition needs a new sync (Kafka's ``OffsetSyncWriter``):
on the first record mirrored, whenever the downstream offset stops following the upstream one
one for one (a gap: compacted or transactional records), and at least every ``offset.lag.max``
upstream offsets. ``OffsetSyncStore`` reads the offset-syncs topic from the beginning and
translates an upstream offset conservatively, as MirrorMaker 2 does since Kafka 3.5: an offset
equal to a sync's upstream offset maps exactly; one past it maps to the sync's downstream
offset + 1, so a consumer that fails over never skips a record (it may read a few again).
"""

from __future__ import annotations

import bisect
import threading
import time

from odradek.client import Consumer, TopicPartition
from odradek.connect.mirror.mirror_wire import OffsetSync

MAX_SYNCS_PER_PARTITION = 1024


class OffsetSyncWriter:
    def __init__(self, max_lag: int):
        self.max_lag = max_lag
        self._last: dict[tuple[str, int], OffsetSync] = {}

    def update(self, topic: str, partition: int, upstream: int, downstream: int) -> OffsetSync | None:
        """The sync to write now that ``upstream`` landed at ``downstream``, if one is due."""
        previous = self._last.get((topic, partition))
        due = (
            previous is None
            or upstream - previous.upstream_offset > self.max_lag
            or downstream - previous.downstream_offset != upstream - previous.upstream_offset
            or downstream < previous.downstream_offset
        )
        if not due:
            return None
        sync = OffsetSync(topic, partition, upstream, downstream)
        self._last[topic, partition] = sync
        return sync


class OffsetSyncStore:
    """The syncs of one offset-syncs topic, kept up to date by ``refresh`` (call it before translating)."""

    def __init__(self, client_config: dict[str, str], topic: str):
        self.topic = topic
        self._consumer = Consumer(
            {**client_config, "enable.auto.commit": "false", "auto.offset.reset": "earliest"}
        )
        self._consumer.assign([TopicPartition(topic, 0)])
        self._upstream: dict[tuple[str, int], list[int]] = {}
        self._downstream: dict[tuple[str, int], list[int]] = {}
        self._lock = threading.Lock()

    def refresh(self, timeout: float = 5.0) -> None:
        """Read every sync written so far."""
        tp = TopicPartition(self.topic, 0)
        end = self._consumer.end_offsets([tp])[tp]

        deadline = time.monotonic() + timeout
        while self._consumer.position(tp) < end and time.monotonic() < deadline:
            for record in self._consumer.poll(0.5):
                if record.key is not None and record.value is not None:
                    self._add(OffsetSync.decode(record.key, record.value))

    def _add(self, sync: OffsetSync) -> None:
        key = (sync.topic, sync.partition)
        with self._lock:
            ups = self._upstream.setdefault(key, [])
            downs = self._downstream.setdefault(key, [])
            if ups and sync.upstream_offset <= ups[-1]:
                # The source task restarted and re-synced from an earlier point: start afresh.
                at = bisect.bisect_left(ups, sync.upstream_offset)
                del ups[at:], downs[at:]
            ups.append(sync.upstream_offset)
            downs.append(sync.downstream_offset)
            if len(ups) > MAX_SYNCS_PER_PARTITION:
                del ups[: len(ups) // 2], downs[: len(downs) // 2]

    def translate(self, topic: str, partition: int, upstream: int) -> int | None:
        """The downstream offset to resume at for a group committed at ``upstream``, or None if unknown."""
        with self._lock:
            ups = self._upstream.get((topic, partition))
            if not ups:
                return None
            at = bisect.bisect_right(ups, upstream) - 1
            if at < 0:
                return None  # older than every sync we hold: no safe translation
            downstream = self._downstream[topic, partition][at]
            return downstream if ups[at] == upstream else downstream + 1

    def close(self) -> None:
        self._consumer.close()
