"""Event time from the records themselves: ``Consumed.with_timestamp_extractor(extractor)``, Kafka's
``TimestampExtractor``.

Kafka Streams gives every record a timestamp before it enters the topology (the one windows,
grace periods and joins go by): the record's own by default, or what the source's extractor says.
Here ``extractor(record, partition_time)`` gets a ``ConsumerRecord`` (``key`` and ``value``
deserialized with the source's serdes, ``timestamp`` its timestamp in ms, ``topic``, ``offset``)
and the largest timestamp extracted so far in this Spark partition of the micro-batch (-1 before
the first), and returns the record's timestamp in ms. As in Kafka, a record given a negative
timestamp is dropped, with a warning; a record the serdes cannot read goes to the
deserialization exception handler.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from odradek.streams.serdes import Serde
from odradek.streams.stage import skip_bad_record

log = logging.getLogger("odradek.streams")


@dataclass(frozen=True)
class ConsumerRecord:
    """What a timestamp extractor sees of a record."""

    key: Any
    value: Any
    timestamp: int
    topic: str | None
    offset: int


def extract_timestamps(
    extractor: Callable, key_serde: Serde, value_serde: Serde, continue_on_bad_records: bool
) -> Callable:
    """The ``mapInArrow`` function giving each record (``stage.RECORD_SCHEMA``) its extracted
    timestamp, its bytes unchanged."""

    def run(batches):
        import pyarrow as pa

        partition_time = -1
        for batch in batches:
            micros_list = batch.column("timestamp").cast(pa.int64()).to_pylist()
            kept, stamps = [], []
            for row, (key_bytes, value_bytes, micros, offset, topic) in enumerate(
                zip(
                    batch.column("key").to_pylist(),
                    batch.column("value").to_pylist(),
                    micros_list,
                    batch.column("offset").to_pylist(),
                    batch.column("topic").to_pylist(),
                    strict=True,
                )
            ):
                try:
                    key = key_serde.deserialize(topic or "", key_bytes)
                    value = value_serde.deserialize(topic or "", value_bytes)
                except Exception as exc:  # noqa: BLE001 - any serde failure goes to the handler
                    skip_bad_record(exc, topic, offset, continue_on_bad_records)
                    continue
                record = ConsumerRecord(key, value, -1 if micros is None else micros // 1000, topic, offset)
                stamp = extractor(record, partition_time)
                if stamp is None or stamp < 0:
                    log.warning(
                        "skipping a record (topic %s, offset %s): its extracted timestamp is %r",
                        topic,
                        offset,
                        stamp,
                    )
                    continue
                partition_time = max(partition_time, int(stamp))
                kept.append(row)
                stamps.append(int(stamp) * 1000)
            taken = batch.take(pa.array(kept, pa.int64()))
            timestamps = pa.array(stamps, pa.int64()).cast(batch.schema.field("timestamp").type)
            yield pa.RecordBatch.from_arrays(
                [timestamps if name == "timestamp" else taken.column(name) for name in batch.schema.names],
                schema=batch.schema,
            )

    return run
