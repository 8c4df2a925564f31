"""Windowed aggregations of Kafka Streams, as Spark Structured Streaming plans.

The compiler calls ``windowed_aggregate`` with a streaming (or batch) DataFrame of records:

- ``key``: the grouping key, already deserialized (any Spark type that can be grouped on);
- ``value``: the value, deserialized (for ``count`` it may be anything);
- ``timestamp``: the record's event time, a Spark ``timestamp`` (Kafka's record timestamp);
- ``order`` (optional): a sortable column giving the order Kafka would process records in (the
  offset, or (partition, offset) packed into a long); without it, records fold in timestamp order.

It returns a DataFrame with ``key``, ``window_start`` and ``window_end`` (ms since the epoch, longs) and
``value`` (the count as a long, or the reduced/aggregated value). Kafka's semantics mapped to Spark's:

- Event time is the record timestamp; stream time is the largest timestamp seen. A window accepts
  records until stream time reaches its end plus the grace period: Spark's watermark with a delay of
  the grace period, applied to the window (Spark drops a record when its window's end <= watermark,
  as Kafka's KStreamWindowAggregate does). Spark moves the watermark between micro-batches and judges
  a micro-batch's records against the watermark of the micro-batch before, so stream time advances
  per trigger (``commit.interval.ms``) and lateness lags it by one trigger; a window already emitted
  never comes out again (records for it are dropped).
- Late records (beyond the grace period) are dropped; Spark counts them per trigger in the query's
  progress (``numRowsDroppedByWatermark``): ``dropped_late_records(query)`` adds them up.
- Without suppression the result is a changelog of updates at each trigger (output mode ``update``);
  with ``final_only`` (``suppress(Suppressed.until_window_closes(...))``) each window is emitted once,
  after its grace period (output mode ``append``). ``output_mode(final_only)`` says which.
- Session windows: Kafka's session ends at its last record (inclusive); Spark's ``session_window``
  ends at the last record plus the gap, so ``window_end`` is moved back by the gap.
- ``reduce``/``aggregate`` with Python functions keep the window's values in Spark's state
  (``collect_list``) and fold them in Kafka's processing order when the window is emitted: the state of a
  window grows with its record count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class WindowSpec:
    """What the compiler hands over from TimeWindows / SessionWindows (all in ms).

    ``kind`` is ``"time"`` (tumbling when ``advance_ms`` is None or equals ``size_ms``, else hopping)
    or ``"session"`` (``size_ms`` is the inactivity gap).
    """

    kind: str
    size_ms: int
    grace_ms: int
    advance_ms: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("time", "session"):
            raise ValueError(f"window kind must be 'time' or 'session', got {self.kind!r}")
        if self.size_ms <= 0 or self.grace_ms < 0:
            raise ValueError(f"window size must be > 0 and grace >= 0 (got {self.size_ms}, {self.grace_ms})")
        if self.advance_ms is not None and not 0 < self.advance_ms <= self.size_ms:
            raise ValueError(f"advance must be in (0, size]: got {self.advance_ms} for size {self.size_ms}")


def output_mode(final_only: bool) -> str:
    """Spark's output mode for a windowed aggregation: ``append`` when suppressed, else ``update``."""
    return "append" if final_only else "update"


def windowed_aggregate(
    records: Any,
    spec: WindowSpec,
    *,
    reducer: Callable[[Any, Any], Any] | None = None,
    initializer: Callable[[], Any] | None = None,
    aggregator: Callable[[Any, Any, Any], Any] | None = None,
    result_type: Any = None,
) -> Any:
    """Count (no function), reduce (``reducer(agg, value)``) or aggregate (``initializer()`` and
    ``aggregator(key, value, agg)``) per key and window; see the module docstring for the contract.
    ``result_type`` is the Spark type of a reduced/aggregated value (default: the value's type for
    reduce, string for aggregate)."""
    from pyspark.sql import functions as F

    window_col = _window_column(spec)
    stream = records.withWatermark("timestamp", f"{spec.grace_ms} milliseconds")
    grouped = stream.groupBy(F.col("key"), window_col.alias("window"))
    if reducer is None and aggregator is None:
        out = grouped.agg(F.count(F.lit(1)).alias("value"))
    else:
        order = F.col("order") if "order" in records.columns else F.col("timestamp")
        entries = F.collect_list(F.struct(order.alias("o"), F.col("value").alias("v")))
        folded = grouped.agg(entries.alias("entries"))
        fold = _fold_udf(reducer, initializer, aggregator, result_type or _value_type(records, reducer))
        out = folded.select("key", "window", fold(F.col("key"), F.col("entries")).alias("value"))
    end_shift = spec.size_ms if spec.kind == "session" else 0
    if spec.kind == "time":  # Kafka's hopping windows start at 0 or later; Spark's also before
        out = out.where(_millis(F.col("window.start")) >= 0)
    return out.select(
        "key",
        _millis(F.col("window.start")).alias("window_start"),
        (_millis(F.col("window.end")) - F.lit(end_shift)).alias("window_end"),
        "value",
    )


def dropped_late_records(query: Any) -> int:
    """Records a streaming query dropped as late (beyond the grace period), over its recent progress."""
    return sum(
        op.get("numRowsDroppedByWatermark", 0)
        for progress in query.recentProgress
        for op in progress["stateOperators"]
    )


def _window_column(spec: WindowSpec) -> Any:
    from pyspark.sql import functions as F

    if spec.kind == "session":
        return F.session_window("timestamp", f"{spec.size_ms} milliseconds")
    size = f"{spec.size_ms} milliseconds"
    if spec.advance_ms is None or spec.advance_ms == spec.size_ms:
        return F.window("timestamp", size)
    return F.window("timestamp", size, f"{spec.advance_ms} milliseconds")


def _millis(col: Any) -> Any:
    from pyspark.sql import functions as F

    return F.unix_millis(col)


def _value_type(records: Any, reducer: Any) -> Any:
    from pyspark.sql.types import StringType

    return records.schema["value"].dataType if reducer is not None else StringType()


def _fold_udf(reducer, initializer, aggregator, result_type) -> Any:
    from pyspark.sql import functions as F

    def fold(key, entries):
        values = [e["v"] for e in sorted(entries, key=lambda e: e["o"])]
        if reducer is not None:
            # Kafka's reduce skips null values; the first non-null value starts the aggregate.
            agg = None
            for v in values:
                if v is not None:
                    agg = v if agg is None else reducer(agg, v)
            return agg
        agg = initializer() if initializer is not None else None
        for v in values:
            if v is not None:
                agg = aggregator(key, v, agg)
        return agg

    return F.udf(fold, result_type)
