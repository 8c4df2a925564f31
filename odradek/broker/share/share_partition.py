"""One topic-partition as a share group reads it (KIP-932): which records are in flight.

The share-partition start offset (SPSO) is the first record not yet done with; everything
below it is acknowledged or archived. Records from the SPSO on are *available*, *acquired*
by one member (until it acknowledges them or its acquisition lock times out) or done
(*acknowledged*: ACCEPT; *archived*: REJECT, or delivered ``delivery.count.limit`` times).
Acquiring a record counts a delivery; RELEASE (or a lock timing out, or the member leaving)
makes it available again. The SPSO moves past done records; the end of the in-flight
window is the highest offset ever acquired + 1 (SPEO).

Records are acquired by whole batches, read from the log as bytes (batch headers give the
offsets; nothing is decoded), so a record is delivered with its batch. At most
``max_locks`` records past the SPSO are in flight (``share.partition.max.record.locks``);
a read_committed group archives the batches of aborted transactions without delivering them.
An acquisition lock runs out on the broker's timer (``expire``, called by the owner) and an
acknowledgement that comes after it is refused; RENEW (KIP-1222) restarts a lock.

Pure state: the caller gives the clock and the batches.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
# acknowledge types (ShareFetch / ShareAcknowledge; RENEW from v2)
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
_NO_LIMIT = 2**31 - 1

_BATCH_HEADER = struct.Struct(">qi")  # base offset, batch length
_LAST_OFFSET_DELTA = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")  # at 21
_PRODUCER_ID = struct.Struct(">q")  # at 43
_TRANSACTIONAL, _CONTROL = 0x10, 0x20


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


def aborted_batches(data: bytes, batches, aborted: list[tuple[int, int]]) -> set[int]:
    """Indexes of the batches of ``batches`` (``batch_ranges(data)``) that hold records of
    aborted transactions, given their ``(producer id, first offset)`` (the transaction index):
    a read_committed reader drops them, as a consumer does."""
    starts: dict[int, list[int]] = {}
    for pid, first in sorted(aborted, key=lambda a: a[1]):
        starts.setdefault(pid, []).append(first)
    open_: set[int] = set()
    out = set()
    for i, (first, _, pos, _) in enumerate(batches):
        (attributes,) = _ATTRIBUTES.unpack_from(data, pos + 21)
        if not attributes & _TRANSACTIONAL:
            continue
        (pid,) = _PRODUCER_ID.unpack_from(data, pos + 43)
        pending = starts.get(pid)
        while pending and pending[0] <= first:
            open_.add(pid)
            pending.pop(0)
        if pid not in open_:
            continue
        if attributes & _CONTROL:
            open_.discard(pid)  # the abort marker ends it (the marker itself is a control batch)
        else:
            out.add(i)
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
        self.topic_id = None  # of the topic it belongs to (its state's key once the topic is deleted)

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
        self,
        batches,
        member: str,
        now_ms: int,
        lock_ms: int,
        max_records: int,
        delivery_limit: int,
        max_locks: int = _NO_LIMIT,
        archive: frozenset | set = frozenset(),
        record_limit: bool = False,
    ) -> tuple[list[tuple[int, int, int]], list[int]]:
        """Acquire available records of ``batches`` (``(first, last, position, size)``) for
        ``member``, none at or past SPSO + ``max_locks``; the batches whose indexes are in
        ``archive`` (aborted transactions) are archived instead. ``max_records`` is met at a
        batch's end, or exactly with ``record_limit`` (ShareAcquireMode 1). Returns (acquired
        ``(first, last, delivery count)`` runs, indexes of the batches that hold them)."""
        self.expire_locks(now_ms)
        runs: list[tuple[int, int, int]] = []
        used: list[int] = []
        taken = 0
        for i, (first, last, _, _) in enumerate(batches):
            if taken >= max_records:
                break
            if i in archive:
                for offset in range(max(first, self.start_offset), last + 1):
                    r = self.records.get(offset)
                    if r is None and offset >= self.end_offset:
                        self.records[offset] = InFlight(ARCHIVED)
                self.end_offset = max(self.end_offset, last + 1)
                continue
            if first >= self.start_offset + max_locks:
                break
            got_any = False
            upto = min(last + 1, self.start_offset + max_locks)  # one past the last offset looked at
            for offset in range(max(first, self.start_offset), upto):
                if record_limit and taken >= max_records:
                    upto = offset
                    break
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
            self.end_offset = max(self.end_offset, upto)
            if got_any:
                used.append(i)
        self._advance()
        return runs, used

    def expire(self, member: str, first: int, last: int, deadline_ms: int, delivery_limit: int) -> bool:
        """The acquisition lock ``member`` took on ``first``..``last`` with ``deadline_ms`` ran
        out: those records it still holds under that lock are available again (archived once
        delivered ``delivery_limit`` times). Whether anything changed."""
        changed = False
        for offset in range(first, last + 1):
            r = self.records.get(offset)
            if r is not None and r.state == ACQUIRED and r.member == member and r.deadline_ms == deadline_ms:
                r.state = ARCHIVED if r.delivery_count >= delivery_limit else AVAILABLE
                r.member = None
                changed = True
        if changed:
            self._advance()
        return changed

    def acknowledge(
        self,
        member: str,
        first: int,
        last: int,
        types: list[int],
        now_ms: int | None = None,
        delivery_limit: int = _NO_LIMIT,
        lock_ms: int = 0,
    ) -> bool:
        """Apply one acknowledgement batch; False (nothing changed) when any record in it is
        not acquired by ``member``, or its lock ran out by ``now_ms`` (INVALID_RECORD_STATE).
        A released record delivered ``delivery_limit`` times is archived; RENEW keeps it
        acquired for ``lock_ms`` more."""
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
            if now_ms is not None and r.deadline_ms <= now_ms:
                return False  # its lock ran out (the timer may not have fired yet)
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
                r.state = ARCHIVED if r.delivery_count >= delivery_limit else AVAILABLE
            elif kind == RENEW:
                r.deadline_ms = (now_ms or 0) + lock_ms
                continue
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


def invalid_acknowledgements(request) -> str | None:
    """What is wrong with a ShareFetch's or ShareAcknowledge's acknowledge types, or None:
    each is GAP..REJECT, or RENEW from v2 in a request that says IsRenewAck (Kafka answers
    INVALID_REQUEST)."""
    body = request.body
    renew = bool(getattr(body, "is_renew_ack", False))
    for t in body.topics:
        for p in t.partitions:
            for b in p.acknowledgement_batches:
                for kind in b.acknowledge_types:
                    if kind == RENEW and not renew:
                        return "RENEW acknowledgements need IsRenewAck (ShareFetch/ShareAcknowledge v2)"
                    if not GAP <= kind <= RENEW:
                        return f"unknown acknowledge type {kind}"
    return None
