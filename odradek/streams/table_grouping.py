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
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

from odradek.streams.serdes import LongSerde, Serde


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


def fold(df, node, key_serde: Serde, change_serde: Serde, default_value_serde: Serde) -> tuple[Any, Serde]:
    """The aggregation of the changes in ``df`` (key, value: a ``ChangeSerde`` change, offset):
    a streaming DataFrame of updated (key, value) rows in update mode, and the values' serde."""
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
        agg = agg_serde.deserialize("", state.get[0]) if state.exists else None
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
        yield pd.DataFrame({"key": [key[0]], "value": [encoded]})

    updates = (
        df.select("key", "value", "offset")
        .groupBy("key")
        .applyInPandasWithState(
            update, "key binary, value binary", "agg binary", "update", GroupStateTimeout.NoTimeout
        )
    )
    return updates, agg_serde
