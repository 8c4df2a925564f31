"""An independent model of Kafka Streams' windowed counts, written from Kafka's documented rules
(not from odradek's code), for the windowed DSL tests to check outputs against record by record.

Time windows: a record at ``ts`` belongs to every window [start, start + size) with start a
multiple of ``advance``, start >= 0, start <= ts < start + size. Stream time is the largest
timestamp seen so far, this record's included; a window still takes records while its end is after
stream time − grace; each window a record misses counts one dropped record. With suppression a
window comes out once, when stream time reaches end + grace.

Sliding windows (KIP-450): [start, start + d], both ends inclusive. A key's windows are, for each of
its records at t, the left window [t - d, t] ([0, d] when t < d) and, when another record of the key
lies in (t, t + 1 + d], the right window [t + 1, t + 1 + d]; a window's value folds the records in
it, in processing order. A record is dropped when t + d < stream time − grace; a window's final
value comes out once stream time passes end + grace.
"""

from __future__ import annotations

import struct


def windows_of(ts: int, size: int, advance: int) -> list[tuple[int, int]]:
    # Only the starts that can hold ts (a range from 0 would walk ts / advance starts: ~10^8 for now).
    first = max(0, ts - size + advance) // advance * advance
    return [(s, s + size) for s in range(first, ts + 1, advance) if s <= ts < s + size]


class CountModel:
    """Feed batches of (key, ts); ``feed`` returns the batch's (updates, finals)."""

    def __init__(self, size: int, grace: int, advance: int | None = None):
        self.size, self.grace, self.advance = size, grace, advance or size
        self.stream_time = -1
        self.counts: dict[tuple, int] = {}
        self.emitted: set[tuple] = set()
        self.dropped = 0

    def feed(self, batch: list[tuple[str, int]]) -> tuple[dict, list]:
        updates: dict[tuple, int] = {}
        for key, ts in batch:
            self.stream_time = max(self.stream_time, ts)
            for start, end in windows_of(ts, self.size, self.advance):
                if end > self.stream_time - self.grace:
                    window = (key, start, end)
                    self.counts[window] = self.counts.get(window, 0) + 1
                    updates[window] = self.counts[window]
                else:
                    self.dropped += 1
        finals = sorted(
            (w, n)
            for w, n in self.counts.items()
            if w[2] + self.grace <= self.stream_time and w not in self.emitted
        )
        self.emitted.update(w for w, _ in finals)
        return updates, finals


class SlidingModel:
    """Sliding windows by brute force from the definition above: every window recomputed from the
    kept records after each record. It covers records on time or within the grace period, and
    records late for every window (dropped); ``feed`` refuses a record late for some windows only."""

    def __init__(self, difference: int, grace: int, init=lambda: 0, add=lambda agg, _value: agg + 1):
        self.d, self.grace, self.init, self.add = difference, grace, init, add
        self.stream_time = -1
        self.records: dict[str, list[tuple[int, object]]] = {}
        self.emitted: set[tuple] = set()
        self.dropped = 0

    def starts(self, key: str) -> set[int]:
        times = [t for t, _ in self.records.get(key, [])]
        lefts = {max(0, t - self.d) for t in times}
        rights = {p + 1 for p in times if any(p < s <= p + 1 + self.d for s in times)}
        return lefts | rights

    def value(self, key: str, start: int):
        agg = self.init()
        for t, v in self.records[key]:
            if start <= t <= start + self.d:
                agg = self.add(agg, v)
        return agg

    def table(self) -> dict[tuple, object]:
        """Every window so far: (key, start, end) → value."""
        return {(k, s, s + self.d): self.value(k, s) for k in self.records for s in self.starts(k)}

    def feed(self, batch) -> tuple[dict, list]:
        """``batch``: (key, ts, value); returns the batch's updates (latest per window) and the
        windows it closed, with their final values, sorted."""
        updates: dict[tuple, object] = {}
        for key, ts, value in batch:
            self.stream_time = max(self.stream_time, ts)
            close = self.stream_time - self.grace
            if ts + self.d < close:
                self.dropped += 1
                continue
            assert ts >= close, f"the model does not cover a record late for some windows only ({ts})"
            before = self.starts(key)
            self.records.setdefault(key, []).append((ts, value))
            for start in self.starts(key):
                if start not in before or start <= ts <= start + self.d:
                    updates[(key, start, start + self.d)] = self.value(key, start)
        finals = sorted(
            (w, v)
            for w, v in self.table().items()
            if w[2] + self.grace < self.stream_time and w not in self.emitted
        )
        self.emitted.update(w for w, _ in finals)
        return updates, finals


def sessions(timestamps: list[int], gap: int) -> list[tuple[int, int, list[int]]]:
    """Sessions of one key when none is late: the sorted timestamps cut where two neighbours are
    more than ``gap`` apart; each session (start, end, its timestamps)."""
    out: list[tuple[int, int, list[int]]] = []
    for ts in sorted(timestamps):
        if out and ts - out[-1][1] <= gap:
            start, _end, members = out[-1]
            out[-1] = (start, ts, [*members, ts])
        else:
            out.append((ts, ts, [ts]))
    return out


def decode_time_windowed(data: bytes) -> tuple[str, int]:
    """A TimeWindowedSerializer key of a UTF-8 key: (key, window start)."""
    return data[:-8].decode(), struct.unpack(">q", data[-8:])[0]
