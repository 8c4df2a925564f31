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


def apply_ops(ops: list[tuple], key, value, context: RecordContext | None) -> list[tuple]:
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


def skip_bad_record(exc: Exception, topic: str | None, offset: int, continue_on_bad_records: bool) -> None:
    """The deserialization exception handler: logs a record its serdes cannot read and returns
    (LogAndContinue: the caller skips it), or fails the query (LogAndFail)."""
    where = f"topic {topic}, offset {offset}" if topic else f"offset {offset}"
    if continue_on_bad_records:
        log.warning("skipping a record (%s) its serdes cannot read: %s", where, exc)
        return
    raise StreamsException(
        f"deserialization failed for a record ({where}): {exc}; set "
        "default.deserialization.exception.handler to "
        "org.apache.kafka.streams.errors.LogAndContinueExceptionHandler to skip such records"
    ) from exc


def stage_function(
    ops: list[tuple],
    in_key: Serde,
    in_value: Serde,
    out_key: Serde,
    out_value: Serde,
    continue_on_bad_records: bool,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function ``mapInArrow`` runs on each Spark partition."""

    needs_context = any(op[0] == "choose" for op in ops)

    def run(batches):
        import pyarrow as pa

        for batch in batches:
            # Only key and value become Python objects; the other columns stay Arrow and are
            # gathered for the records that come out (``take``), and the record's timestamp in
            # milliseconds is computed only for a topic chooser's RecordContext.
            in_keys = batch.column("key").to_pylist()
            in_values = batch.column("value").to_pylist()
            in_topics = batch.column("topic").to_pylist()
            millis = batch.column("timestamp").cast(pa.int64()).to_pylist() if needs_context else None
            keys, values, rows, chosen_topics = [], [], [], []
            for row, (key_bytes, value_bytes, topic) in enumerate(
                zip(in_keys, in_values, in_topics, strict=True)
            ):
                try:
                    key = in_key.deserialize(topic or "", key_bytes)
                    value = in_value.deserialize(topic or "", value_bytes)
                except Exception as exc:  # noqa: BLE001 - any serde failure goes to the handler
                    skip_bad_record(exc, topic, batch.column("offset")[row].as_py(), continue_on_bad_records)
                    continue
                if needs_context:
                    micros = millis[row] if millis is not None else None
                    offset = batch.column("offset")[row].as_py()
                    context = RecordContext(0 if micros is None else micros // 1000, offset, topic)
                else:
                    context = None
                for k, v, chosen in apply_ops(ops, key, value, context):
                    where_to = chosen or topic or ""
                    keys.append(out_key.serialize(where_to, k))
                    values.append(out_value.serialize(where_to, v))
                    rows.append(row)
                    chosen_topics.append(chosen or topic)
            taken = pa.array(rows, pa.int64())
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(keys, pa.binary()),
                    pa.array(values, pa.binary()),
                    batch.column("timestamp").take(taken),
                    batch.column("offset").take(taken),
                    pa.array(chosen_topics, pa.string())
                    if needs_context
                    else batch.column("topic").take(taken),
                ],
                schema=batch.schema,
            )

    return run
