"""A GroupCoordinator on a fake __consumer_offsets and a manual clock, for protocol-level unit tests."""

from __future__ import annotations

import struct

from odradek.broker.group.group_coordinator import GroupConfig, GroupCoordinator, JoinRequest
from odradek.broker.group.partitioning import partition_for
from odradek.broker.timing_wheel import SystemTimer


class FakeOffsetsTopic:
    """Records kept in lists; ``fail`` makes the next appends raise."""

    def __init__(self, partitions: int = 3):
        self.count = partitions
        self.logs: dict[int, list] = {p: [] for p in range(partitions)}
        self.led = set(range(partitions))
        self.fail: Exception | None = None

    def partition_count(self):
        return self.count

    def partition_for(self, group_id):
        return partition_for(group_id, self.count)

    def ensure_created(self):
        return self.count

    def leader(self, partition):
        return 0

    def led_partitions(self):
        return set(self.led)

    def log_size(self, partition):
        return 0

    def append(self, partition, entries, now_ms):
        if self.fail is not None:
            raise self.fail
        self.logs[partition].extend(entries)

    def replay(self, partition, chunk_bytes):
        yield list(self.logs[partition])


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


class Harness:
    def __init__(self, **config):
        self.now = 1_000_000
        self.timer = SystemTimer(loop=None, start_ms=0)
        self.topic = FakeOffsetsTopic()
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
