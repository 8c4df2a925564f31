"""KStream-KStream windowed joins of Kafka Streams, as Spark stream-stream joins.

The compiler calls ``stream_stream_join(left, right, spec, how)`` with two streaming (or batch)
DataFrames, each with:

- ``key``: the join key, already deserialized (both sides the same Spark type);
- ``value``: the value, deserialized;
- ``timestamp``: the record's event time, a Spark ``timestamp``.

It returns ``key``, ``left_value``, ``right_value`` and ``timestamp`` (the later of the two records'
times, as Kafka stamps a join result; the present side's time when the other is null); the compiler
applies the ValueJoiner to (left_value, right_value). Kafka's semantics mapped to Spark's:

- ``JoinWindows.of_time_difference_and_grace(d, g)``: a left record at time t joins the right records
  of the same key with times in [t - before, t + after] (before = after = d unless set apart): a
  time-range join condition.
- The grace period is the watermark delay of both inputs: Spark keeps each side's records in its
  state until the watermark passes their window, then evicts them; later records are dropped. As in
  spark_windows, the watermark (the smaller of the two sides' stream times, minus the grace) moves
  between micro-batches, and a micro-batch's records are judged against the one before's.
- ``left``/``outer``: a record with no partner within its window is emitted once, with null on the
  other side, after its window has closed (Kafka 3.1+'s semantics, no spurious early null results);
  Spark's left/full outer stream-stream joins do exactly that. Output mode ``append``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_HOW = {"inner": "inner", "left": "left_outer", "outer": "full_outer"}


@dataclass(frozen=True)
class JoinSpec:
    """What the compiler hands over from JoinWindows (ms)."""

    before_ms: int
    after_ms: int
    grace_ms: int

    def __post_init__(self) -> None:
        if self.before_ms < 0 or self.after_ms < 0 or self.grace_ms < 0:
            raise ValueError(f"join windows need before, after, grace >= 0: got {self}")


def stream_stream_join(left: Any, right: Any, spec: JoinSpec, how: str = "inner") -> Any:
    """Join two record streams within ``spec``'s time windows; ``how`` is inner, left or outer."""
    from pyspark.sql import functions as F

    if how not in _HOW:
        raise ValueError(f"join type must be one of {', '.join(_HOW)}, got {how!r}")
    delay = f"{spec.grace_ms} milliseconds"
    lhs = left.select(
        F.col("key").alias("l_key"), F.col("value").alias("left_value"), F.col("timestamp").alias("l_ts")
    )
    rhs = right.select(
        F.col("key").alias("r_key"), F.col("value").alias("right_value"), F.col("timestamp").alias("r_ts")
    )
    lhs, rhs = lhs.withWatermark("l_ts", delay), rhs.withWatermark("r_ts", delay)
    condition = (
        (F.col("l_key") == F.col("r_key"))
        & (F.col("r_ts") >= F.col("l_ts") - F.expr(f"INTERVAL {spec.before_ms} MILLISECONDS"))
        & (F.col("r_ts") <= F.col("l_ts") + F.expr(f"INTERVAL {spec.after_ms} MILLISECONDS"))
    )
    joined = lhs.join(rhs, condition, _HOW[how])
    return joined.select(
        F.coalesce("l_key", "r_key").alias("key"),
        "left_value",
        "right_value",
        F.greatest("l_ts", "r_ts").alias("timestamp"),  # greatest skips nulls
    )
