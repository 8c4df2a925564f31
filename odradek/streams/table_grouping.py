"""``KTable.group_by(...).count() / reduce(adder, subtractor) / aggregate(init, adder, subtractor)``
on Spark, as Kafka's ``KTableRepartitionMap`` and ``KTableAggregate``/``KTableReduce`` do it.

A table row is a key's latest value, so when it changes its old value must leave the group it
was counted in. The select (``select_changes``) keeps each table key's current value in Spark's
state store and, for every update, sends ``(old group, subtract old value)`` and then
``(new group, add new value)`` through the repartition topic ``<application.id>-<store>-repartition``
(a real topic here: two stateful steps in a row need one between them in Spark, as in Kafka).
The aggregation (``fold``) reads that topic grouped by the new key and applies the subtractor
and the adder to its stored aggregate, emitting the key's new aggregate at each commit.

On the repartition topic a change is its value's bytes after one flag byte (1: add, 0: subtract):
``ChangeSerde``. Kafka's own ``ChangedSerializer`` layout differs; the topic is internal.

Re-grouping the table of an aggregation (``stream.group_by(...).count().group_by(...)``, Kafka's
TopArticlesExample) needs no second copy of the table: as Kafka's aggregations "send old values"
to a ``KTableRepartitionMap``, the aggregation's own state function gives each updated key's value
before the micro-batch (``old``) beside its new one, and ``changes_of_updates`` turns those rows,
inside the aggregation's query, into the same subtract/add records for the repartition topic.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

from odradek.streams.serdes import LongSerde, Serde
from odradek.streams.stage import RECORD_SCHEMA, apply_ops
from odradek.streams.topology import Node, Topology

# Aggregations whose table can be re-grouped from their updates (a windowed table cannot yet).
REGROUPABLE = {"count", "reduce", "aggregate", "table_aggregate"}
_TABLE_OPS = ("table_filter", "table_filter_not", "table_map_values")
UPDATES_WITH_OLD = "key binary, value binary, old binary"


class ChangeSerde(Serde):
    """``(added: bool, value)`` as a flag byte and the value in ``inner``."""

    kafka_class_name = "odradek.streams.table_grouping.ChangeSerde"

    def __init__(self, inner: Serde):
        self.inner = inner

    def serialize(self, topic, change):
        if change is None:
            return None
        added, value = change
        return (b"\x01" if added else b"\x00") + (self.inner.serialize(topic, value) or b"")

    def deserialize(self, topic, data):
        if data is None:
            return None
        return bool(data[0]), self.inner.deserialize(topic, bytes(data[1:]))


def select_changes(selector: Callable, key_serde: Serde, value_serde: Serde) -> Callable:
    """The state function of the select: table updates in, (group, change) records out (pickled)."""

    def changes(key_bytes, rows, state) -> list[tuple]:
        current = state.get[0] if state.exists else None
        key = key_serde.deserialize("", key_bytes)
        out = []
        for value, ts, offset in zip(rows["value"], rows["timestamp"], rows["offset"], strict=True):
            if current is not None:
                old_group, old_value = selector(key, value_serde.deserialize("", current))
                out.append((_pickle(old_group), _pickle((False, old_value)), ts, offset, None))
            if value is not None:
                new_group, new_value = selector(key, value_serde.deserialize("", value))
                out.append((_pickle(new_group), _pickle((True, new_value)), ts, offset, None))
            current = value
        if current is None:
            if state.exists:
                state.remove()
        else:
            state.update((current,))
        return out

    return changes


def regrouped_aggregation(select: Node) -> Node | None:
    """The aggregation whose table ``select`` (a ``table_select``) re-groups, through the table's
    ``filter``/``map_values``; None when the table is not an aggregation's."""
    if select.op != "table_select":
        return None
    table = select.args["table"]
    while table.op in _TABLE_OPS:
        table = table.parents[0]
    return table if table.op in REGROUPABLE else None


def regroupings(topology: Topology, aggregation: Node) -> list[Node]:
    """The ``table_select`` nodes re-grouping ``aggregation``'s table."""
    return [n for n in topology.nodes if n.op == "table_select" and regrouped_aggregation(n) is aggregation]


def _table_ops(select: Node) -> list[tuple]:
    """The table's ``filter``/``map_values`` between the aggregation and ``select``, in order."""
    ops = []
    table = select.args["table"]
    while table.op in _TABLE_OPS:
        ops.append((table.op, table.args["fn"], table.args.get("with_key", False)))
        table = table.parents[0]
    return ops[::-1]


def changes_of_updates(updates, select: Node, key_serde: Serde, value_serde: Serde):
    """``updates``: a micro-batch of an aggregation's rows (``UPDATES_WITH_OLD``); the records the
    select sends to its repartition topic: per key, the old value's group and value to subtract,
    then the new value's to add (pickled, as ``select_changes`` gives them)."""
    from pyspark.sql import functions as F

    ops, selector = _table_ops(select), select.args["fn"]

    def table_value(key, data):
        if data is None:
            return None
        [(_, value, _)] = apply_ops(ops, key, value_serde.deserialize("", data), None)
        return value

    def run(batches):
        import pyarrow as pa

        for batch in batches:
            keys, values, taken = [], [], []
            for row, (key_bytes, new, old) in enumerate(
                zip(
                    batch.column("key").to_pylist(),
                    batch.column("value").to_pylist(),
                    batch.column("old").to_pylist(),
                    strict=True,
                )
            ):
                key = key_serde.deserialize("", key_bytes)
                for added, data in ((False, old), (True, new)):
                    value = table_value(key, data)
                    if value is not None:
                        group, selected = selector(key, value)
                        keys.append(_pickle(group))
                        values.append(_pickle((added, selected)))
                        taken.append(row)
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(keys, pa.binary()),
                    pa.array(values, pa.binary()),
                    batch.column("timestamp").take(pa.array(taken, pa.int64())),
                    pa.array([0] * len(keys), pa.int64()),
                    pa.array([None] * len(keys), pa.string()),
                ],
                names=["key", "value", "timestamp", "offset", "topic"],
            )

    rows = updates.select("key", "value", "old", F.current_timestamp().alias("timestamp"))
    return rows.mapInArrow(run, RECORD_SCHEMA)


def _pickle(value) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def result_serde(node, change_serde: Serde, default_value_serde: Serde) -> Serde:
    kind, materialized = node.args["aggregation"], node.args.get("value_serde")
    if kind == "count":
        return LongSerde()
    if materialized is not None:
        return materialized
    inner = change_serde.inner if isinstance(change_serde, ChangeSerde) else change_serde
    return inner if kind == "reduce" else default_value_serde


def fold(
    df, node, key_serde: Serde, change_serde: Serde, default_value_serde: Serde, *, with_old: bool = False
) -> tuple[Any, Serde]:
    """The aggregation of the changes in ``df`` (key, value: a ``ChangeSerde`` change, offset):
    a streaming DataFrame of updated (key, value) rows in update mode, and the values' serde;
    ``with_old``: each row also has the key's value before the micro-batch (``old``)."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    agg_serde = result_serde(node, change_serde, default_value_serde)
    kind, args = node.args["aggregation"], node.args

    def apply(key, agg, added: bool, value):
        if kind == "count":
            return (agg or 0) + 1 if added else (agg - 1 if agg is not None else None)
        if kind == "reduce":
            if added:
                return value if agg is None else args["adder"](agg, value)
            return None if agg is None else args["subtractor"](agg, value)
        if added:
            return args["adder"](key, value, args["initializer"]() if agg is None else agg)
        return None if agg is None else args["subtractor"](key, value, agg)

    def update(key, frames, state):
        import pandas as pd

        k = key_serde.deserialize("", key[0])
        old = state.get[0] if state.exists else None
        agg = agg_serde.deserialize("", old) if old is not None else None
        for frame in frames:
            for data in frame.sort_values("offset", kind="stable")["value"]:
                change = change_serde.deserialize("", data)
                if change is not None:
                    agg = apply(k, agg, *change)
        encoded = agg_serde.serialize("", agg)
        if encoded is None:
            if state.exists:
                state.remove()
        else:
            state.update((encoded,))
        row = {"key": [key[0]], "value": [encoded]}
        yield pd.DataFrame({**row, "old": [old]} if with_old else row)

    schema = UPDATES_WITH_OLD if with_old else "key binary, value binary"
    updates = (
        df.select("key", "value", "offset")
        .groupBy("key")
        .applyInPandasWithState(update, schema, "agg binary", "update", GroupStateTimeout.NoTimeout)
    )
    return updates, agg_serde
