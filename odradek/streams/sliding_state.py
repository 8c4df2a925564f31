"""Kafka Streams' sliding windows (KIP-450, ``KStreamSlidingWindowAggregate``), one record at a
time, for ``window_state.process``.

A sliding window [start, start + d] holds its ends (d: the time difference). Windows exist only
where records are: each record at ``t`` has its *left* window [t - d, t] ([0, d] while t < d,
Kafka's stand-in for windows that would start before 0) and, once a record falls in (t, t + 1 + d],
its *right* window [t + 1, t + 1 + d]. A record is added to every window of its key that holds it.
A new window starts from the aggregate of the records it already holds, copied from the window that
holds just those: for a left window, the window ending last before ``t``; for a right window, the
window holding ``t`` that starts last (its value before this record).

Lateness, as Kafka's: with close = stream time − grace, a window whose end is before close takes
nothing more (each such window a record meets counts one dropped record); a record whose right
window's end, t + 1 + d, is not after close is dropped whole (one dropped record). A window's final
value is known once stream time passes end + grace (``WindowDef.close_delay_ms`` is grace + 1).

Closed windows stay in ``state["retired"]`` while a record could still meet them (Kafka keeps them
2·d + grace in its window store): copies and the search for the previous record read them.
``state["index"]`` holds each key's window starts, sorted, open and retired alike.
"""

from __future__ import annotations

import bisect
import copy
from typing import Any


def slide(state: dict, windows: Any, folder: Any, step: Any, key: bytes, value, ts: int, key_obj) -> None:
    """One record through the sliding-window aggregation of its key (see the module docstring)."""
    _Slide(state, windows, folder, step, key, value, ts, key_obj).run()


def retire(state: dict, closed: list, windows: Any) -> None:
    """Keeps the windows ``process`` just closed (``(window, agg, ts)``) for copies and lookups,
    and forgets those that start more than 2·d + grace before stream time (Kafka's retention)."""
    retired = state.setdefault("retired", {})
    for window, agg, ts in closed:
        retired[window] = (agg, ts)
    horizon = state["time"] - windows.grace_ms - 2 * windows.size_ms
    for window in [w for w in retired if w[1] < horizon]:
        del retired[window]
        starts = state["index"][window[0]]
        del starts[bisect.bisect_left(starts, window[1])]
        if not starts:
            del state["index"][window[0]]


class _Slide:
    def __init__(self, state, windows, folder, step, key, value, ts, key_obj):
        self.open: dict = state["windows"]
        self.retired: dict = state.setdefault("retired", {})
        self.index: dict = state.setdefault("index", {})
        self.starts: list = self.index.setdefault(key, [])
        self.d = windows.size_ms
        self.close = state["time"] - windows.grace_ms
        self.folder, self.step = folder, step
        self.key, self.value, self.ts, self.key_obj = key, value, ts, key_obj
        self.missed = 0

    def run(self) -> None:
        if self.ts + self.d < self.close:
            self.step.late.append((self.key, self.ts, 1))
        else:
            if self.ts < self.d:
                self._early()
            else:
                self._record()
            if self.missed:
                self.step.late.append((self.key, self.ts, self.missed))
        if not self.starts:  # a dropped record's key: no empty start list kept
            del self.index[self.key]

    # -- the windows of the key ---------------------------------------------------------------
    def _get(self, start: int):
        window = (self.key, start, start + self.d)
        return self.open.get(window) or self.retired.get(window)

    def _starts_in(self, low: int, high: int) -> list[int]:
        return self.starts[bisect.bisect_left(self.starts, low) : bisect.bisect_right(self.starts, high)]

    def _add(self, start: int, entry) -> None:
        """This record into the window at ``start``, whose value so far is ``entry`` (None: a new
        window, from the initializer); a closed window takes nothing and counts one drop."""
        if start + self.d < self.close:
            self.missed += 1
            return
        agg = self.folder.init() if entry is None else entry[0]
        newest = self.ts if entry is None else max(self.ts, entry[1])
        self._put(start, (self.folder.add(self.key_obj, self.value, agg), newest))

    def _put(self, start: int, entry) -> None:
        window = (self.key, start, start + self.d)
        if window not in self.open and window not in self.retired:
            bisect.insort(self.starts, start)
        self.open[window] = entry
        self.step.updates[window] = entry

    def _right_window(self, near: list[int], after):
        """This record's right window, when it is missing and a later record falls in it: the
        value of ``after`` (the window holding this record that starts last), copied before this
        record joins it (an aggregator may change its aggregate in place)."""
        if self.ts + 1 in near or after is None or after[1] <= self.ts:
            return None
        return copy.deepcopy(after[0]), after[1]

    # -- a record at t >= d ---------------------------------------------------------------------
    def _record(self) -> None:
        t, d = self.ts, self.d
        near = self._starts_in(max(0, t - 2 * d), t + 1)
        left = self._get(t - d)
        holding = [s for s in near if t - d < s <= t]  # windows holding t, besides the left one
        if left is not None and left[1] >= t:
            # A record at t came before: every window this one belongs to exists already.
            for start in [*holding, t - d]:
                self._add(start, self._get(start))
            return
        right = self._right_window(near, self._get(holding[-1]) if holding else None)
        for start in holding:
            self._add(start, self._get(start))
        before_starts = [s for s in near if s < t - d]  # windows ending before t
        before = self._get(before_starts[-1]) if before_starts else None
        previous = before[1] if before is not None else left[1] if left is not None else None
        if previous is not None and previous + 1 not in near and previous + 1 + d >= t:
            self._add(previous + 1, None)  # the previous record's right window, now not empty
        if left is not None:
            self._add(t - d, left)
        elif before is not None and previous is not None and previous >= t - d:
            self._add(t - d, (copy.deepcopy(before[0]), t))
        else:
            self._add(t - d, None)
        if right is not None:
            self._put(t + 1, right)  # always open: its end is after close

    # -- a record at t < d: its left window is [0, d] ---------------------------------------------
    def _early(self) -> None:
        t = self.ts
        near = self._starts_in(0, t + 1)
        combined = self._get(0) if near and near[0] == 0 else None
        holding = [s for s in near if 0 < s <= t]
        after = self._get(holding[-1]) if holding else None
        if after is None and combined is not None and combined[1] > t:
            after = combined
        right = self._right_window(near, after)
        for start in holding:
            self._add(start, self._get(start))
        if right is not None:
            self._put(t + 1, right)
        previous = combined[1] if combined is not None and combined[1] < t else None
        if previous is not None and previous + 1 not in near:
            self._add(previous + 1, None)
        self._add(0, combined)
