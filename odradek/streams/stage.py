"""The Python stage: a run of user functions (filter, map, flat_map, …) fused into one Spark
``mapInArrow`` step over records kept as bytes.

Spark carries each record as ``key``/``value`` bytes in the serdes they were written with;
a stage deserializes them once, runs the pending operations on Python values, and serializes
the results with the serdes of where they go (a topic's, a grouping's, or ``PickleSerde``
between two stages). A record the source's value serde cannot read goes to the
deserialization exception handler: skipped and logged (LogAndContinue) or failing the
query (LogAndFail), as Kafka's handlers do.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from odradek.streams.serdes import Serde

log = logging.getLogger("odradek.streams")

RECORD_SCHEMA = "key binary, value binary, timestamp timestamp, offset long, topic string"


class StreamsException(RuntimeError):
    """A failure while processing records (Kafka's StreamsException)."""


class PickleSerde(Serde):
    """Python values between two stages of one app (never written to a topic)."""

    kafka_class_name = "odradek.streams.stage.PickleSerde"

    def serialize(self, topic, value):
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)

    def deserialize(self, topic, data):
        return None if data is None else pickle.loads(data)


class RecordContext:
    """What a topic chooser sees besides key and value (Kafka's RecordContext)."""

    __slots__ = ("timestamp", "offset", "topic")

    def __init__(self, timestamp: int, offset: int, topic: str | None):
        self.timestamp, self.offset, self.topic = timestamp, offset, topic


def _call(fn: Callable, with_key: bool, key, value):
    return fn(key, value) if with_key else fn(value)


def apply_ops(ops: list[tuple], key, value, context: RecordContext) -> list[tuple]:
    """Run ``ops`` on one record; returns the (key, value, topic) records that come out."""
    items = [(key, value, None)]
    for op in ops:
        kind, fn = op[0], op[1]
        out = []
        for k, v, topic in items:
            if kind == "filter":
                if fn(k, v):
                    out.append((k, v, topic))
            elif kind == "filter_not":
                if not fn(k, v):
                    out.append((k, v, topic))
            elif kind == "map":
                nk, nv = fn(k, v)
                out.append((nk, nv, topic))
            elif kind == "map_values":
                out.append((k, _call(fn, op[2], k, v), topic))
            elif kind == "flat_map":
                out.extend((nk, nv, topic) for nk, nv in fn(k, v))
            elif kind == "flat_map_values":
                out.extend((k, nv, topic) for nv in _call(fn, op[2], k, v))
            elif kind == "select_key":
                out.append((fn(k, v), v, topic))
            elif kind == "peek":
                fn(k, v)
                out.append((k, v, topic))
            elif kind == "foreach":
                fn(k, v)
            elif kind == "branch":  # fn: the split's predicates; op[2]: this branch's index
                index = op[2]
                first = next((i for i, p in enumerate(fn) if p(k, v)), None)
                if first == index:
                    out.append((k, v, topic))
            elif kind == "drop_null_keys":
                if k is not None:
                    out.append((k, v, topic))
            elif kind == "table_filter":
                out.append((k, v if v is None or fn(k, v) else None, topic))
            elif kind == "table_filter_not":
                out.append((k, v if v is None or not fn(k, v) else None, topic))
            elif kind == "table_map_values":
                out.append((k, None if v is None else _call(fn, op[2], k, v), topic))
            elif kind == "choose":
                out.append((k, v, fn(k, v, context)))
            else:  # pragma: no cover - the compiler only emits the kinds above
                raise StreamsException(f"unknown operation {kind!r}")
        items = out
    return items


def stage_function(
    ops: list[tuple],
    in_key: Serde,
    in_value: Serde,
    out_key: Serde,
    out_value: Serde,
    continue_on_bad_records: bool,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function ``mapInArrow`` runs on each Spark partition."""

    def run(batches):
        import pyarrow as pa

        for batch in batches:
            cols = batch.to_pydict()
            keys, values, stamps, offsets, topics = [], [], [], [], []
            for key_bytes, value_bytes, ts, offset, topic in zip(
                cols["key"], cols["value"], cols["timestamp"], cols["offset"], cols["topic"], strict=True
            ):
                try:
                    key = in_key.deserialize(topic or "", key_bytes)
                    value = in_value.deserialize(topic or "", value_bytes)
                except Exception as exc:  # noqa: BLE001 - any serde failure goes to the handler
                    where = f"topic {topic}, offset {offset}" if topic else f"offset {offset}"
                    if continue_on_bad_records:
                        log.warning("skipping a record (%s) its serdes cannot read: %s", where, exc)
                        continue
                    raise StreamsException(
                        f"deserialization failed for a record ({where}): {exc}; set "
                        "default.deserialization.exception.handler to "
                        "org.apache.kafka.streams.errors.LogAndContinueExceptionHandler to skip such records"
                    ) from exc
                millis = int(ts.replace(tzinfo=UTC).timestamp() * 1000) if isinstance(ts, datetime) else 0
                for k, v, chosen in apply_ops(ops, key, value, RecordContext(millis, offset, topic)):
                    keys.append(out_key.serialize(chosen or topic or "", k))
                    values.append(out_value.serialize(chosen or topic or "", v))
                    stamps.append(ts)
                    offsets.append(offset)
                    topics.append(chosen or topic)
            yield pa.RecordBatch.from_pydict(
                {"key": keys, "value": values, "timestamp": stamps, "offset": offsets, "topic": topics},
                schema=batch.schema,
            )

    return run
