"""A GroupCoordinator on a fake __consumer_offsets and a manual clock, for protocol-level unit tests."""

from __future__ import annotations

import struct

from odradek.broker.group.classic_group_manager import JoinRequest
from odradek.broker.group.group_coordinator import GroupConfig, GroupCoordinator
from odradek.broker.group.partitioning import partition_for
from odradek.broker.timing_wheel import SystemTimer


class FakeOffsetsTopic:
    """Records kept in lists: ``(key, value)``, ``(key, value, producer_id)`` when
    transactional, ``(None, None, producer_id, committed)`` for a transaction marker.
    ``fail`` makes the next appends raise; ``size`` is what ``log_size`` answers, and
    ``chunk_records`` how many records ``replay`` yields at a time; ``hold_replication``
    keeps writes from reaching the "ISR" until ``settle_held``."""

    def __init__(self, partitions: int = 3):
        self.count = partitions
        self.logs: dict[int, list] = {p: [] for p in range(partitions)}
        self.led = set(range(partitions))
        self.fail: Exception | None = None
        self.size = 0
        self.chunk_records = 1000
        self.replays_started: dict[int, int] = dict.fromkeys(range(partitions), 0)
        self.unreadable: set[int] = set()  # partitions whose log cannot be read
        self.topic_counts: dict[str, int] = {}  # other topics' partition counts (the metadata)
        self.hold_replication = False  # True: writes wait for ``settle_held``
        self.unsettled: list = []

    def partition_count(self):
        return self.count

    def partition_count_of(self, topic):
        return self.topic_counts.get(topic)

    def partition_for(self, group_id):
        return partition_for(group_id, self.count)

    def ensure_created(self):
        return self.count

    def leader(self, partition):
        return 0

    def led_partitions(self):
        return set(self.led)

    def log_size(self, partition):
        return self.size

    def append(self, partition, entries, now_ms, producer_id=-1, producer_epoch=-1):
        if self.fail is not None:
            raise self.fail
        if producer_id >= 0:
            entries = [(key, value, producer_id) for key, value in entries]
        self.logs[partition].extend(entries)

    def settle_when_replicated(self, partition, timeout_ms, settle):
        """At once (a single node), or kept in ``unsettled`` while ``hold_replication``."""
        if self.hold_replication:
            self.unsettled.append(settle)
        else:
            settle(0)

    def settle_held(self, error: int = 0) -> None:
        """The held writes reached the ISR (``error`` 0) or did not."""
        held, self.unsettled = self.unsettled, []
        for settle in held:
            settle(error)

    def write_marker(self, partition, producer_id, committed):
        self.logs[partition].append((None, None, producer_id, committed))

    def replay(self, partition, chunk_bytes):
        """Like OffsetsTopic.replay: what the log holds when reading starts (up to its high watermark)."""
        self.replays_started[partition] += 1
        if partition in self.unreadable:
            raise OSError(f"cannot read __consumer_offsets-{partition}")
        entries = [
            entry if len(entry) == 4 else (*entry, -1, None)[:3] + (None,) for entry in self.logs[partition]
        ]
        for i in range(0, len(entries), self.chunk_records):
            yield entries[i : i + self.chunk_records]


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


class Harness:
    def __init__(self, topic: FakeOffsetsTopic | None = None, **config):
        self.now = 1_000_000
        self.timer = SystemTimer(loop=None, start_ms=0)
        self.topic = topic if topic is not None else FakeOffsetsTopic()
        defaults = {"initial_rebalance_delay_ms": 100, "min_session_timeout_ms": 100}
        defaults.update(config)
        self.coordinator = GroupCoordinator(
            self.topic, self.timer, GroupConfig(**defaults), wall_clock_ms=lambda: self.now
        )
        self.coordinator.start()

    def advance(self, ms: int) -> None:
        self.now += ms
        self.timer.advance_clock(self.timer.now_ms() + ms)

    def join(
        self,
        group: str,
        member_id: str = "",
        *,
        instance: str | None = None,
        protocols=None,
        session_ms: int = 1000,
        rebalance_ms: int = 2000,
        protocol_type: str = "consumer",
        v4: bool = True,
        skip: bool = False,
        client_id: str = "c",
    ) -> list:
        results: list = []
        req = JoinRequest(
            group,
            member_id,
            instance,
            client_id,
            "/127.0.0.1",
            session_ms,
            rebalance_ms,
            protocol_type,
            protocols if protocols is not None else [("range", subscription("t"))],
            v4,
            skip,
        )
        self.coordinator.join_group(req, results.append)
        return results

    def join_member(self, group: str, **kw) -> tuple[str, list]:
        """A dynamic member's full JoinGroup: MEMBER_ID_REQUIRED, then the real join."""
        first = self.join(group, **kw)
        assert first and first[0].error == 79, first  # MEMBER_ID_REQUIRED
        member_id = first[0].member_id
        return member_id, self.join(group, member_id, **kw)

    def sync(
        self, group, generation, member_id, assignments=None, instance=None, ptype=None, pname=None
    ) -> list:
        results: list = []
        self.coordinator.sync_group(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
            protocol_type=ptype,
            protocol_name=pname,
            assignments=assignments or {},
            callback=results.append,
        )
        return results
