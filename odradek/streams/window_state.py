"""Kafka Streams' windowed aggregation and final-result suppression, record by record, in plain
Python: what one task's ``KStreamWindowAggregate`` / ``KStreamSlidingWindowAggregate`` /
``KStreamSessionWindowAggregate`` and ``KTableSuppressProcessor`` do. ``compile_windows.py`` runs it inside Spark's
``applyInPandasWithState``, one state per task, so the rules below are Kafka's exactly:

- stream time is the largest record timestamp the task has seen, moved by each record before it
  is judged (``observedStreamTime``);
- time windows: a record updates each window holding it whose end is after stream time − grace;
  each window it misses counts once in ``dropped-records`` (Kafka's sensor, per window);
- sliding windows (``sliding_state.py``): [start, start + d] with both ends inclusive, a left
  window ending at each record and a right window starting just after it once a later record
  falls in it; a window closes when stream time passes end + grace;
- session windows: a record merges the key's sessions within the inactivity gap of it; the merged
  session is dropped when its end is before stream time − grace − gap; merged-away sessions are
  deleted (a tombstone in the changelog of updates);
- ``until_window_closes``: a window comes out once, with its final value, when stream time reaches
  its end + grace (sessions: end + gap + grace; sliding windows: passes end + grace); updates
  without suppression come out per commit.

Keys are compared as bytes (Kafka compares serialized keys); values and aggregates are Python
objects; the state is a dict that pickles.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from odradek.streams.sliding_state import retire, slide

_LONG = struct.Struct(">q")
NO_TIMESTAMP = -1


@dataclass(frozen=True)
class WindowDef:
    """The windows of an aggregation, in ms: ``kind`` is ``"time"`` (``advance_ms`` < size for
    hopping), ``"sliding"`` (``size_ms`` is the time difference) or ``"session"`` (``size_ms`` is
    the inactivity gap)."""

    kind: str
    size_ms: int
    grace_ms: int
    advance_ms: int = 0

    @property
    def close_delay_ms(self) -> int:
        """How far stream time must pass a window's end before the window closes."""
        if self.kind == "sliding":  # the end is inclusive: it takes records while end >= close
            return self.grace_ms + 1
        return self.grace_ms + (self.size_ms if self.kind == "session" else 0)


@dataclass(frozen=True)
class Folder:
    """An aggregation as Kafka's three functions: ``init()``, ``add(key, value, agg)`` and, for
    sessions, ``merge(key, agg1, agg2)``."""

    init: Callable[[], Any]
    add: Callable[[Any, Any, Any], Any]
    merge: Callable[[Any, Any, Any], Any] | None = None


def count_folder() -> Folder:
    return Folder(lambda: 0, lambda _k, _v, agg: agg + 1, lambda _k, a, b: a + b)


def reduce_folder(reducer: Callable) -> Folder:
    def add(_key, value, agg):
        return value if agg is None else reducer(agg, value)

    return Folder(lambda: None, add, lambda key, a, b: add(key, b, a))


def aggregate_folder(initializer: Callable, aggregator: Callable, merger: Callable | None) -> Folder:
    return Folder(initializer, aggregator, merger)


def time_windows_for(ts: int, size: int, advance: int) -> list[tuple[int, int]]:
    """Kafka's ``TimeWindows.windowsFor``: the [start, end) windows holding ``ts``, starts >= 0."""
    start = max(0, ts - size + advance)
    start -= start % advance
    windows = []
    while start <= ts:
        windows.append((start, start + size))
        start += advance
    return windows


def windowed_key(kind: str, key: bytes, start: int, end: int) -> bytes:
    """The key as Kafka's TimeWindowedSerializer (key + start) / SessionWindowedSerializer
    (key + end + start) write it."""
    if kind == "session":
        return key + _LONG.pack(end) + _LONG.pack(start)
    return key + _LONG.pack(start)


def store_key(kind: str, key: bytes, start: int, end: int) -> bytes:
    """The key in the store's changelog: a window store's key + start + 4-byte sequence number
    (0: no duplicates kept), a session store's key + end + start."""
    if kind == "session":
        return windowed_key(kind, key, start, end)
    return key + _LONG.pack(start) + b"\0\0\0\0"


def new_state() -> dict:
    # windows: {(key, start, end): (aggregate, timestamp)}; timestamp is the newest record's
    return {"time": NO_TIMESTAMP, "windows": {}}


@dataclass
class Step:
    """What one batch of records did: window updates (latest per window, None = deleted),
    windows closed with their final values, and the records dropped as late."""

    updates: dict
    finals: list
    late: list  # (key, timestamp, windows missed)


def process(state: dict, windows: WindowDef, folder: Folder, records, *, final_results: bool) -> Step:
    """Feed ``records`` ((key bytes, value, timestamp ms, key object)) in processing order."""
    step = Step({}, [], [])
    for key, value, ts, key_obj in records:
        state["time"] = max(state["time"], ts)
        if windows.kind == "session":
            _session(state, windows, folder, step, key, value, ts, key_obj)
        elif windows.kind == "sliding":
            slide(state, windows, folder, step, key, value, ts, key_obj)
        else:
            _time(state, windows, folder, step, key, value, ts, key_obj)
    closed = sorted(
        (w for w in state["windows"] if w[2] + windows.close_delay_ms <= state["time"]),
        key=lambda w: (w[2], w[1], w[0]),
    )
    finals = []
    for window in closed:  # closed windows never change again: out of the state
        agg, ts = state["windows"].pop(window)
        finals.append((window, agg, ts))
    if windows.kind == "sliding":
        retire(state, finals, windows)
    if final_results:
        step.finals.extend(finals)
    return step


def _time(state, windows: WindowDef, folder: Folder, step: Step, key, value, ts, key_obj) -> None:
    close_time = state["time"] - windows.grace_ms
    missed = 0
    for start, end in time_windows_for(ts, windows.size_ms, windows.advance_ms):
        if end <= close_time:
            missed += 1
            continue
        window = (key, start, end)
        old = state["windows"].get(window)
        agg = folder.add(key_obj, value, folder.init() if old is None else old[0])
        entry = (agg, ts if old is None else max(ts, old[1]))
        state["windows"][window] = entry
        step.updates[window] = entry
    if missed:
        step.late.append((key, ts, missed))


def _session(state, windows: WindowDef, folder: Folder, step: Step, key, value, ts, key_obj) -> None:
    gap = windows.size_ms
    close_time = state["time"] - windows.grace_ms - gap
    near = sorted(
        (w for w in state["windows"] if w[0] == key and w[1] <= ts + gap and w[2] >= ts - gap),
        key=lambda w: w[1],
    )
    start = min([ts, *(w[1] for w in near)])
    end = max([ts, *(w[2] for w in near)])
    if end < close_time:
        step.late.append((key, ts, 1))
        return
    agg = folder.init()
    newest = ts
    merged = (key, start, end)
    for window in near:
        old_agg, old_ts = state["windows"].pop(window)
        assert folder.merge is not None
        agg = folder.merge(key_obj, agg, old_agg)
        newest = max(newest, old_ts)
        if window != merged:
            step.updates[window] = None  # merged away: deleted
    entry = (folder.add(key_obj, value, agg), newest)
    state["windows"][merged] = entry
    step.updates[merged] = entry
