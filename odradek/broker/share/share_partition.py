"""One topic-partition as a share group reads it (KIP-932): which records are in flight.

The share-partition start offset (SPSO) is the first record not yet done with; everything
below it is acknowledged or archived. Records from the SPSO on are *available*, *acquired*
by one member (until it acknowledges them or its acquisition lock times out) or done
(*acknowledged*: ACCEPT; *archived*: REJECT, or delivered ``delivery.count.limit`` times).
Acquiring a record counts a delivery; RELEASE (or a lock timing out, or the member leaving)
makes it available again. The SPSO moves past done records; the end of the in-flight
window is the highest offset ever acquired + 1 (SPEO).

Records are acquired by whole batches, read from the log as bytes (batch headers give the
offsets; nothing is decoded), so a record is delivered with its batch.

Pure state: the caller gives the clock and the batches.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
# acknowledge types (ShareFetch / ShareAcknowledge)
GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3

_BATCH_HEADER = struct.Struct(">qi")  # base offset, batch length
_LAST_OFFSET_DELTA = struct.Struct(">i")


def batch_ranges(data: bytes) -> list[tuple[int, int, int, int]]:
    """``(first offset, last offset, position, size)`` of each whole batch in ``data``."""
    out = []
    pos = 0
    while pos + 61 <= len(data):
        base, length = _BATCH_HEADER.unpack_from(data, pos)
        size = 12 + length
        if pos + size > len(data):
            break
        (delta,) = _LAST_OFFSET_DELTA.unpack_from(data, pos + 23)
        out.append((base, base + delta, pos, size))
        pos += size
    return out


@dataclass
class InFlight:
    state: int = AVAILABLE
    delivery_count: int = 0
    member: str | None = None
    deadline_ms: int = 0


class SharePartition:
    def __init__(self, start_offset: int):
        self.start_offset = start_offset
        self.records: dict[int, InFlight] = {}  # offset -> state, from the SPSO on
        self.end_offset = start_offset  # one past the highest offset ever acquired
        self.state_epoch = 0  # of its state in __share_group_state: a new one when the start offset is reset
        self.leader_epoch = -1  # of the partition when its leader read the state

    def expire_locks(self, now_ms: int) -> None:
        for r in self.records.values():
            if r.state == ACQUIRED and r.deadline_ms <= now_ms:
                r.state, r.member = AVAILABLE, None

    def release_member(self, member: str) -> int:
        """A member left or closed its session: its records are available again."""
        released = 0
        for r in self.records.values():
            if r.state == ACQUIRED and r.member == member:
                r.state, r.member = AVAILABLE, None
                released += 1
        return released

    def acquire(
        self, batches, member: str, now_ms: int, lock_ms: int, max_records: int, delivery_limit: int
    ) -> tuple[list[tuple[int, int, int]], list[int]]:
        """Acquire available records of ``batches`` (``(first, last, position, size)``) for
        ``member``; returns (acquired ``(first, last, delivery count)`` runs, indexes of the
        batches that hold them)."""
        self.expire_locks(now_ms)
        runs: list[tuple[int, int, int]] = []
        used: list[int] = []
        taken = 0
        for i, (first, last, _, _) in enumerate(batches):
            if taken >= max_records:
                break
            got_any = False
            for offset in range(max(first, self.start_offset), last + 1):
                r = self.records.get(offset)
                if r is None:
                    if offset < self.end_offset:
                        continue  # done and forgotten (below a hole the SPSO has not passed)
                    r = self.records[offset] = InFlight()
                if r.state != AVAILABLE:
                    continue
                if r.delivery_count >= delivery_limit:
                    r.state = ARCHIVED
                    continue
                r.state, r.member, r.deadline_ms = ACQUIRED, member, now_ms + lock_ms
                r.delivery_count += 1
                taken += 1
                got_any = True
                if runs and runs[-1][1] == offset - 1 and runs[-1][2] == r.delivery_count:
                    runs[-1] = (runs[-1][0], offset, r.delivery_count)
                else:
                    runs.append((offset, offset, r.delivery_count))
            self.end_offset = max(self.end_offset, last + 1)
            if got_any:
                used.append(i)
        self._advance()
        return runs, used

    def acknowledge(self, member: str, first: int, last: int, types: list[int]) -> bool:
        """Apply one acknowledgement batch; False (nothing changed) when any record in it is
        not acquired by ``member`` (INVALID_RECORD_STATE)."""
        if not types or last < first:
            return False
        offsets = range(first, last + 1)
        for offset in offsets:
            kind = types[0] if len(types) == 1 else types[offset - first] if offset - first < len(types) else None
            if kind is None:
                return False
            if kind == GAP:
                continue
            r = self.records.get(offset)
            if r is None or r.state != ACQUIRED or r.member != member:
                return False
        for offset in offsets:
            kind = types[0] if len(types) == 1 else types[offset - first]
            r = self.records.get(offset)
            if kind == GAP:
                if r is not None and r.state == ACQUIRED and r.member == member:
                    r.state = ARCHIVED
                continue
            if kind == ACCEPT:
                r.state = ACKNOWLEDGED
            elif kind == REJECT:
                r.state = ARCHIVED
            elif kind == RELEASE:
                r.state = AVAILABLE
            r.member = None
        self._advance()
        return True

    def _advance(self) -> None:
        while True:
            r = self.records.get(self.start_offset)
            if r is None:
                if self.start_offset < self.end_offset:
                    self.start_offset += 1  # an offset no batch holds (compacted away)
                    continue
                return
            if r.state not in (ACKNOWLEDGED, ARCHIVED):
                return
            del self.records[self.start_offset]
            self.start_offset += 1

    def counts(self) -> dict[str, int]:
        names = {AVAILABLE: "available", ACQUIRED: "acquired", ACKNOWLEDGED: "acknowledged", ARCHIVED: "archived"}
        out = dict.fromkeys(names.values(), 0)
        for r in self.records.values():
            out[names[r.state]] += 1
        return out
