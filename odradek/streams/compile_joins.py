"""Joins and table re-grouping, compiled to Spark: the compiler (``compiler.py``) asks
``join_flow(compiler, node, roots, memo)`` for the records a join node (``dsl_joins.JOIN_OPS``)
puts out, as ``(DataFrame, key serde, value serde)``; the values are the joiner's Python results
(``PickleSerde``) until a sink writes them. Each runs inside the app's appending query.

- KStream–KStream: Spark's stream-stream join (``spark_joins``): keys compared as bytes in one
  serde, a time-range condition, the grace period as both sides' watermark delay; left/outer
  rows without a partner come once their window has closed.
- KStream–KTable, KTable–KTable and ``KTable.group_by``'s select: Spark's built-in joins cannot
  keep "the table's latest value per key" nor emit on a table update, so each is one
  ``applyInPandasWithState`` over the union of both inputs, grouped by key bytes, its state
  (the table sides' latest values) kept in Spark's checkpointed state store. Within a
  micro-batch, records are taken in timestamp order (a table record before a stream record of
  the same time), as Kafka picks the next record by timestamp across a task's partitions.

A table side is read as its changelog: the records of the table's topic (or stream) through its
``filter``/``map_values`` (which map a changelog record by record), or a table join's output.
"""

from __future__ import annotations

import pickle
from typing import Any

from odradek.streams.serdes import Serde
from odradek.streams.spark_joins import JoinSpec, stream_stream_join
from odradek.streams.stage import RECORD_SCHEMA, PickleSerde
from odradek.streams.table_grouping import select_changes
from odradek.streams.topology import Node, TopologyException

_TABLE_OPS = ("table_filter", "table_filter_not", "table_map_values")


def _pickled(value) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def changelog_flow(c: Any, table: Node, roots: dict, memo: dict):
    """The records whose latest value per key is ``table``, as a compiler ``Flow``."""
    if table.op == "latest":
        return c.flow(table.parents[0], roots, memo)
    if table.op in _TABLE_OPS:
        args = table.args
        return changelog_flow(c, table.parents[0], roots, memo).then(
            table.op, args["fn"], args.get("with_key", False)
        )
    if table.op == "table_join":
        return c.flow(table, roots, memo)
    raise TopologyException(
        f"{table.name}: joining the KTable of an aggregation, or re-grouping a windowed one, is not "
        "supported yet; "
        "write it to a topic with to_stream().to(...) and read that topic with builder.table(...)"
    )


def _serdes(c: Any, flow, key: Serde | None, value: Serde | None) -> tuple[Serde, Serde]:
    kept_key, kept_value = c.kept_serdes(flow)
    return key or kept_key or c.config.key_serde, value or kept_value or c.config.value_serde


def join_flow(c: Any, node: Node, roots: dict, memo: dict) -> tuple[Any, Serde, Serde]:
    build = {
        "stream_join": _stream_stream,
        "stream_table_join": _stream_table,
        "table_join": _table_table,
        "table_select": _table_select,
    }[node.op]
    return build(c, node, roots, memo)


# -- KStream-KStream ----------------------------------------------------------------------------


def _stream_stream(c: Any, node: Node, roots: dict, memo: dict):
    from pyspark.sql import functions as F

    args = node.args
    left, right = c.flow(args["left"], roots, memo), c.flow(args["right"], roots, memo)
    key_serde, left_serde = _serdes(c, left, args["key_serde"], args["value_serde"])
    _, right_serde = _serdes(c, right, key_serde, args["other_value_serde"])
    present = F.col("key").isNotNull() & F.col("value").isNotNull()  # Kafka drops null keys and values
    lhs = c.encode(left, key_serde, left_serde).where(present)
    rhs = c.encode(right, key_serde, right_serde).where(present)
    windows = args["windows"]
    joined = stream_stream_join(
        lhs, rhs, JoinSpec(windows.before_ms, windows.after_ms, windows.grace_ms), args["how"]
    )
    run = _joiner_stage(args["joiner"], args["with_key"], key_serde, left_serde, right_serde)
    return joined.mapInArrow(run, RECORD_SCHEMA), key_serde, PickleSerde()


def _joiner_stage(joiner, with_key: bool, key_serde: Serde, left_serde: Serde, right_serde: Serde):
    """mapInArrow over joined rows (key, left_value, right_value, timestamp): the joiner's result."""

    def run(batches):
        import pyarrow as pa

        for batch in batches:
            cols = batch.to_pydict()
            values = []
            for key, lv, rv in zip(cols["key"], cols["left_value"], cols["right_value"], strict=True):
                left, right = left_serde.deserialize("", lv), right_serde.deserialize("", rv)
                if with_key:
                    values.append(_pickled(joiner(key_serde.deserialize("", key), left, right)))
                else:
                    values.append(_pickled(joiner(left, right)))
            n = len(values)
            yield pa.RecordBatch.from_arrays(
                [
                    batch.column("key"),
                    pa.array(values, pa.binary()),
                    batch.column("timestamp"),
                    pa.array([0] * n, pa.int64()),
                    pa.array([None] * n, pa.string()),
                ],
                names=["key", "value", "timestamp", "offset", "topic"],
            )

    return run


# -- the stateful ones: applyInPandasWithState over a union of sides ------------------------------


def _union_by_key(sides: list, fn, state_schema: str):
    """``sides``: DataFrames (key, value, timestamp, offset); each tagged with its index in
    ``side``; ``fn(key_bytes, rows, state)`` gets a pandas frame sorted as Kafka would take them:
    one side in offset order (a key's records share a partition), several by timestamp."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    tagged = [
        df.select("key", "value", "timestamp", "offset", F.lit(i).alias("side")).where(
            F.col("key").isNotNull()
        )
        for i, df in enumerate(sides)
    ]
    union = tagged[0]
    for other in tagged[1:]:
        union = union.unionByName(other)

    single = len(sides) == 1  # (the closure must not hold the DataFrames)

    def update(key, frames, state):
        import pandas as pd

        rows = pd.concat(list(frames), ignore_index=True)
        if single:
            rows = rows.sort_values("offset", kind="stable")
        else:  # a table record (side 1) before a stream record (side 0) of the same time
            rows = rows.assign(order=-rows["side"]).sort_values(
                ["timestamp", "order", "offset"], kind="stable"
            )
        out = fn(key[0], rows, state)
        yield pd.DataFrame(out, columns=["key", "value", "timestamp", "offset", "topic"])

    return union.groupBy("key").applyInPandasWithState(
        update, RECORD_SCHEMA, state_schema, "append", GroupStateTimeout.NoTimeout
    )


def _call_joiner(joiner, with_key: bool, key, left, right):
    return joiner(key, left, right) if with_key else joiner(left, right)


def _stream_table(c: Any, node: Node, roots: dict, memo: dict):
    from pyspark.sql import functions as F

    args = node.args
    stream = c.flow(node.parents[0], roots, memo)
    table = changelog_flow(c, args["table"], roots, memo)
    key_serde, stream_serde = _serdes(c, stream, args["key_serde"], args["value_serde"])
    _, table_serde = _serdes(c, table, key_serde, args["other_value_serde"])
    records = c.encode(stream, key_serde, stream_serde).where(F.col("value").isNotNull())
    changelog = c.encode(table, key_serde, table_serde)
    joiner, with_key, left = args["joiner"], args["with_key"], args["how"] == "left"

    def join(key_bytes, rows, state):
        current = state.get[0] if state.exists else None
        key = key_serde.deserialize("", key_bytes) if with_key else None
        out = []
        for side, value, ts, offset in zip(
            rows["side"], rows["value"], rows["timestamp"], rows["offset"], strict=True
        ):
            if side == 1:  # a table update: remembered, never an output
                current = value
                continue
            if current is None and not left:
                continue
            joined = _call_joiner(
                joiner,
                with_key,
                key,
                stream_serde.deserialize("", value),
                table_serde.deserialize("", current),
            )
            out.append((key_bytes, _pickled(joined), ts, offset, None))
        if current is None:
            if state.exists:
                state.remove()
        else:
            state.update((current,))
        return out

    return _union_by_key([records, changelog], join, "value binary"), key_serde, PickleSerde()


def _table_table(c: Any, node: Node, roots: dict, memo: dict):
    args = node.args
    left = changelog_flow(c, args["left"], roots, memo)
    right = changelog_flow(c, args["right"], roots, memo)
    key_serde, left_serde = _serdes(c, left, None, None)
    _, right_serde = _serdes(c, right, key_serde, None)
    joiner, with_key, how = args["joiner"], args["with_key"], args["how"]

    def result(key, sides):
        """The joined value for these sides' values (bytes), or None when the join has no row."""
        lv, rv = sides[0], sides[1]
        if lv is None and rv is None:
            return None
        if (how == "inner" and (lv is None or rv is None)) or (how == "left" and lv is None):
            return None
        return _call_joiner(
            joiner, with_key, key, left_serde.deserialize("", lv), right_serde.deserialize("", rv)
        )

    def join(key_bytes, rows, state):
        sides = list(state.get) if state.exists else [None, None, 0, 0]  # values, then their times (ms)
        key = key_serde.deserialize("", key_bytes) if with_key else None
        out = []
        for side, value, ts, offset in zip(
            rows["side"], rows["value"], rows["timestamp"], rows["offset"], strict=True
        ):
            before = result(key, sides)
            sides[side], sides[2 + side] = value, int(ts.value // 1_000_000)
            after = result(key, sides)
            # An update that touches a joined row emits it (None: the row is gone, a tombstone).
            if after is not None or before is not None:
                stamp = (
                    max(sides[2], sides[3])
                    if sides[0] is not None and sides[1] is not None
                    else sides[2 + side]
                )
                out.append((key_bytes, _pickled(after), _timestamp(stamp), offset, None))
        if sides[0] is None and sides[1] is None:
            if state.exists:
                state.remove()
        else:
            state.update(tuple(sides))
        return out

    return (
        _union_by_key(
            [c.encode(left, key_serde, left_serde), c.encode(right, key_serde, right_serde)],
            join,
            "left binary, right binary, left_ms long, right_ms long",
        ),
        key_serde,
        PickleSerde(),
    )


def _timestamp(ms: int):
    import pandas as pd

    return pd.Timestamp(ms, unit="ms", tz="UTC")


def _table_select(c: Any, node: Node, roots: dict, memo: dict):
    table = changelog_flow(c, node.args["table"], roots, memo)
    key_serde, value_serde = _serdes(c, table, None, None)
    changes = select_changes(node.args["fn"], key_serde, value_serde)
    return (
        _union_by_key([c.encode(table, key_serde, value_serde)], changes, "value binary"),
        PickleSerde(),
        PickleSerde(),
    )
