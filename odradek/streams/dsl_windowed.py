"""Kafka Streams' windowed grouped streams: ``grouped.windowed_by(TimeWindows | SlidingWindows |
SessionWindows)``
then ``count`` / ``reduce`` / ``aggregate``, giving a ``KTable`` keyed by ``Windowed`` keys, and
``KTable.suppress(Suppressed.until_window_closes(...))``.

Nodes are named as Kafka names them: the store first (``KSTREAM-AGGREGATE-STATE-STORE-…``, or the
``Materialized.as_`` name), then ``KSTREAM-AGGREGATE-…`` / ``KSTREAM-REDUCE-…``; ``suppress`` adds
``KTABLE-SUPPRESS-n`` with its buffer ``KTABLE-SUPPRESS-STATE-STORE-n+1``. ``compile_windows.py``
turns them into Spark.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

from odradek.streams.dsl_options import Materialized, SessionWindows, SlidingWindows, Suppressed, TimeWindows
from odradek.streams.topology import Store, TopologyException
from odradek.streams.window_state import WindowDef

# dsl.py's KGroupedStream and KTable (this module is imported by dsl.py, so it names them only so).
KGroupedStream: TypeAlias = Any
KTable: TypeAlias = Any


def _name_of(named) -> str | None:
    return None if named is None else str(getattr(named, "name", named))


def window_def(windows) -> WindowDef:
    if isinstance(windows, TimeWindows):
        return WindowDef("time", windows.size_ms, windows.grace_ms, windows.advance_ms)
    if isinstance(windows, SessionWindows):
        return WindowDef("session", windows.inactivity_gap_ms, windows.grace_ms)
    if isinstance(windows, SlidingWindows):
        return WindowDef("sliding", windows.time_difference_ms, windows.grace_ms)
    raise TypeError(f"windowed_by takes TimeWindows, SessionWindows or SlidingWindows, not {windows!r}")


class TimeWindowedKStream:
    """A grouped stream cut into time windows (tumbling, hopping or sliding); Kafka's
    ``TimeWindowedKStream``, which ``windowed_by(SlidingWindows)`` also gives."""

    def __init__(self, grouped: KGroupedStream, windows: WindowDef):
        self._grouped = grouped
        self._windows = windows

    def _windowed(self, prefix: str, op: str, named, materialized: Materialized | None, **fns) -> KTable:
        if isinstance(named, Materialized):  # count(Materialized.as_(...)), Kafka's overload
            named, materialized = None, named
        return self._grouped._aggregate(
            prefix, "windowed", materialized, named and _name_of(named), fold=op, windows=self._windows, **fns
        )

    def count(self, named=None, materialized: Materialized | None = None) -> KTable:
        return self._windowed("KSTREAM-AGGREGATE-", "count", named, materialized)

    def reduce(self, reducer: Callable, named=None, materialized: Materialized | None = None) -> KTable:
        return self._windowed("KSTREAM-REDUCE-", "reduce", named, materialized, reducer=reducer)

    def aggregate(
        self,
        initializer: Callable,
        aggregator: Callable,
        named=None,
        materialized: Materialized | None = None,
    ) -> KTable:
        return self._windowed(
            "KSTREAM-AGGREGATE-",
            "aggregate",
            named,
            materialized,
            initializer=initializer,
            aggregator=aggregator,
        )


class SessionWindowedKStream(TimeWindowedKStream):
    """A grouped stream cut into sessions; ``aggregate`` takes a ``merger(key, agg1, agg2)`` that
    combines two sessions' aggregates when a record joins them (Kafka's ``Merger``)."""

    def aggregate(  # type: ignore[override]
        self,
        initializer: Callable,
        aggregator: Callable,
        merger: Callable | None = None,
        named=None,
        materialized: Materialized | None = None,
    ) -> KTable:
        if not callable(merger):
            raise TypeError("a session-windowed aggregate needs a merger(key, agg1, agg2), as Kafka's")
        return self._windowed(
            "KSTREAM-AGGREGATE-",
            "aggregate",
            named,
            materialized,
            initializer=initializer,
            aggregator=aggregator,
            merger=merger,
        )


def windowed_by(grouped: KGroupedStream, windows) -> TimeWindowedKStream:
    spec = window_def(windows)
    if spec.kind == "session":
        return SessionWindowedKStream(grouped, spec)
    return TimeWindowedKStream(grouped, spec)


def suppress(table: KTable, suppressed: Suppressed, named=None) -> KTable:
    """``KTable.suppress``: only ``until_window_closes`` on a windowed aggregation's table."""
    if not isinstance(suppressed, Suppressed) or suppressed.until != "window-closes":
        raise TopologyException(
            "only suppress(Suppressed.until_window_closes(Suppressed.BufferConfig.unbounded())) is supported"
        )
    parent = table._node
    if parent.op != "windowed":
        raise TopologyException(
            f"suppress(until_window_closes) needs a windowed aggregation's KTable directly; {parent.name} is not one"
        )
    builder = table._builder
    name = _name_of(named) or builder._new_name("KTABLE-SUPPRESS-")
    store_name = f"{_name_of(named)}-store" if named else builder._new_name("KTABLE-SUPPRESS-STATE-STORE-")
    # The buffer is Spark's state (the aggregation's own): no changelog of its own is written.
    builder._stores[store_name] = Store(store_name, logged=False)
    node = builder._add(name, "processor", "suppress", [parent])
    node.stores = [store_name]
    return type(table)(builder, node)
