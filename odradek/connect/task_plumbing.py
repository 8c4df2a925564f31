"""What a task's records go through besides the task itself: converters, transforms, error handling.

``TaskPlumbing`` is built per task from the worker config and the connector config (which may
name its own ``key.converter``/``value.converter``/``header.converter`` and ``errors.*`` keys),
as Kafka's worker builds them. ``source_convert`` runs transforms then converters on a
SourceRecord; ``sink_convert`` converters then transforms on a consumed record. Each step runs
under the task's ``ErrorHandler``; a skipped record gives None.

``source_convert_all``/``sink_convert_all`` do a whole poll() or fetched batch. Without
transforms they first try the batch straight through the converters (a batch of one topic in one
``to_connect_all``/``from_connect_all`` call per converter), with no per-record error
wrapper and no copy of the raw record for the dead letter queue; if anything raises, the batch
is done again record by record under the error handler (converters are pure, so nothing is
lost or done twice), and errors.tolerance/DLQ/retries apply per record as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from odradek.connect.converters import CONVERTERS, HEADER_CONVERTERS, Converter, HeaderConverter
from odradek.connect.error_handling import ERROR_CONFIG, SKIPPED, ErrorHandler, RawRecord
from odradek.connect.errors import ConfigException
from odradek.connect.offset_store import OffsetStore
from odradek.connect.records import Headers, SinkRecord, SourceRecord, TimestampType
from odradek.connect.transforms import TransformationChain
from odradek.connect.transforms.transformation_chain import table_lookup
from odradek.connect.worker_config import WorkerConfig

SINK_BATCH = 2000
LOG_APPEND_TIME, CREATE_TIME = TimestampType.LOG_APPEND_TIME, TimestampType.CREATE_TIME

_find_converter = table_lookup(CONVERTERS)
_find_header_converter = table_lookup(HEADER_CONVERTERS)


def make_converter(which: str, connector_config: dict[str, str], worker: WorkerConfig) -> Any:
    """The configured ``key.converter``/``value.converter``/``header.converter`` (connector's first)."""
    if connector_config.get(which):
        name, settings = connector_config[which], _prefixed(connector_config, which)
    else:
        name, settings = worker[which], worker.converter_config(which)
    cls = (_find_header_converter if which == "header.converter" else _find_converter)(name)
    if cls is None:
        raise ConfigException(which, name, f"Class {name} could not be found.")
    converter = cls()
    converter.configure(settings, is_key=which == "key.converter")
    return converter


def _prefixed(config: dict[str, str], which: str) -> dict[str, str]:
    prefix = which + "."
    return {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}


class TaskPlumbing:
    def __init__(
        self,
        connector: str,
        task_id: int,
        connector_config: dict[str, str],
        worker: WorkerConfig,
        offset_store: OffsetStore,
        client_options: Callable[[str], dict],
        metrics_commit: Callable[[bool], None],
    ):
        self.key_converter: Converter = make_converter("key.converter", connector_config, worker)
        self.value_converter: Converter = make_converter("value.converter", connector_config, worker)
        self.header_converter: HeaderConverter = make_converter("header.converter", connector_config, worker)
        self.chain = TransformationChain.from_config(connector_config)
        self.offset_store = offset_store
        self.client_options = client_options
        self.metrics_commit = metrics_commit
        self.flush_interval_s = worker["offset.flush.interval.ms"] / 1000
        self.connector_boundaries = False  # transaction.boundary=connector under exactly-once source support
        self.sink_batch = SINK_BATCH
        self.dlq: list[tuple[str, bytes | None, bytes | None, list]] = []
        self.errors = ErrorHandler(ERROR_CONFIG.parse(connector_config), connector, task_id, self.dlq_send)
        self._dlq_producer: Any = None

    # -- source: transforms, then converters -----------------------------------------------

    def source_convert_all(self, records: list[SourceRecord]) -> list:
        """``(record, topic, key bytes, value bytes, headers)`` of each polled record; topic None
        when the record was skipped."""
        if not self.chain.stages:
            try:
                return self._source_straight(records)
            except Exception:  # noqa: BLE001 - done again below, each record under the error handler
                pass
        out = []
        for record in records:
            converted = self.source_convert(record, self.errors)
            out.append((record, *converted) if converted is not None else (record, None, None, None, None))
        return out

    def _source_straight(self, records: list[SourceRecord]) -> list:
        if len({r.topic for r in records}) > 1:
            return self._source_each(records)
        topic = records[0].topic if records else ""
        headers = [r.headers for r in records]
        keys = self.key_converter.from_connect_all(topic, [r.key_schema for r in records], [r.key for r in records],
                                                   headers)
        values = self.value_converter.from_connect_all(topic, [r.value_schema for r in records],
                                                       [r.value for r in records], headers)
        headers_out = self._headers_out
        return [(r, topic, key, value, headers_out(topic, h) if len(h) else None)
                for r, key, value, h in zip(records, keys, values, headers, strict=True)]

    def _source_each(self, records: list[SourceRecord]) -> list:
        key_out, value_out = self.key_converter.from_connect_data, self.value_converter.from_connect_data
        out = []
        for r in records:
            topic, headers = r.topic, r.headers
            out.append((
                r, topic,
                key_out(topic, r.key_schema, r.key, headers),
                value_out(topic, r.value_schema, r.value, headers),
                self._headers_out(topic, headers) if len(headers) else None,
            ))
        return out

    def source_convert(self, record: SourceRecord, errors: ErrorHandler):
        """``(topic, key bytes, value bytes, headers)`` of a polled record, or None if skipped."""
        transformed = errors.run("TRANSFORMATION", None, self.chain.apply, record, record=record)
        if transformed is None or transformed is SKIPPED:
            return None
        topic = transformed.topic
        key = errors.run("KEY_CONVERTER", type(self.key_converter), self.key_converter.from_connect_data,
                         topic, transformed.key_schema, transformed.key, transformed.headers, record=record)
        if key is SKIPPED:
            return None
        value = errors.run("VALUE_CONVERTER", type(self.value_converter), self.value_converter.from_connect_data,
                           topic, transformed.value_schema, transformed.value, transformed.headers, record=record)
        if value is SKIPPED:
            return None
        headers = None
        if len(transformed.headers):
            headers = errors.run("HEADER_CONVERTER", type(self.header_converter), self._headers_out,
                                 topic, transformed.headers, record=record)
            if headers is SKIPPED:
                return None
        return topic, key, value, headers

    def _headers_out(self, topic: str, headers: Headers) -> list[tuple[str, bytes | None]]:
        convert = self.header_converter.from_connect_header
        return [(h.key, convert(topic, h.key, h.schema, h.value)) for h in headers]

    # -- sink: converters, then transforms -------------------------------------------------

    def sink_convert_all(self, records: list) -> list[SinkRecord]:
        """The SinkRecords of consumed records, skipped ones left out."""
        if not self.chain.stages:
            try:
                return self._sink_straight(records)
            except Exception:  # noqa: BLE001 - done again below, each record under the error handler
                pass
        out = []
        for r in records:
            raw = RawRecord(r.topic, r.partition, r.offset, r.key, r.value, list(r.headers or ()))
            converted = self.sink_convert(r, raw, self.errors)
            if converted is not None:
                out.append(converted)
        return out

    def _sink_straight(self, records: list) -> list[SinkRecord]:
        if len({r.topic for r in records}) > 1:
            return self._sink_each(records)
        topic = records[0].topic if records else ""
        key_schemas, keys = self.key_converter.to_connect_all(topic, [r.key for r in records])
        value_schemas, values = self.value_converter.to_connect_all(topic, [r.value for r in records])
        made, headers_in, log_append, create = SinkRecord.read, self._headers_in, LOG_APPEND_TIME, CREATE_TIME
        return [made(topic, r.partition, r.offset, key_schema, key, value_schema, value, r.timestamp,
                     log_append if r.timestamp_type == 1 else create,
                     headers_in(topic, r.headers) if r.headers else Headers())
                for r, key_schema, key, value_schema, value in zip(records, key_schemas, keys, value_schemas, values, strict=True)]

    def _sink_each(self, records: list) -> list[SinkRecord]:
        key_in, value_in = self.key_converter.to_connect_data, self.value_converter.to_connect_data
        made = SinkRecord.read
        out = []
        for r in records:
            topic = r.topic
            key, value = key_in(topic, r.key), value_in(topic, r.value)
            headers = self._headers_in(topic, r.headers) if r.headers else Headers()
            ts_type = LOG_APPEND_TIME if r.timestamp_type == 1 else CREATE_TIME
            out.append(made(topic, r.partition, r.offset, key.schema, key.value, value.schema, value.value,
                            r.timestamp, ts_type, headers))
        return out

    def sink_convert(self, r, raw: RawRecord, errors: ErrorHandler):
        from odradek.connect.worker_tasks import sink_record

        key = errors.run("KEY_CONVERTER", type(self.key_converter), self.key_converter.to_connect_data,
                         r.topic, r.key, raw=raw)
        if key is SKIPPED:
            return None
        value = errors.run("VALUE_CONVERTER", type(self.value_converter), self.value_converter.to_connect_data,
                           r.topic, r.value, raw=raw)
        if value is SKIPPED:
            return None
        headers = Headers()
        if r.headers:
            headers = errors.run("HEADER_CONVERTER", type(self.header_converter), self._headers_in,
                                 r.topic, r.headers, raw=raw)
            if headers is SKIPPED:
                return None
        record = sink_record(r, key, value, headers)
        transformed = errors.run("TRANSFORMATION", None, self.chain.apply, record, raw=raw, record=record)
        if transformed is None or transformed is SKIPPED:
            return None
        return transformed

    def _headers_in(self, topic: str, headers) -> Headers:
        out = Headers()
        for key, data in headers:
            sv = self.header_converter.to_connect_header(topic, key, data)
            out.add(key, sv.value, sv.schema)
        return out

    # -- dead letter queue -----------------------------------------------------------------

    def dlq_send(self, topic: str, key: bytes | None, value: bytes | None, headers: list) -> None:
        self.dlq.append((topic, key, value, headers))  # sent by the task's loop: flush_dlq

    async def flush_dlq(self) -> None:
        if not self.dlq:
            return
        from odradek.client.producer.producer import Producer

        if self._dlq_producer is None:
            self._dlq_producer = Producer(**self.client_options("producer"), acks="all")
            await self._dlq_producer.start()
        pending, self.dlq = self.dlq, []
        futures = [await self._dlq_producer.send(t, v, k, h) for t, k, v, h in pending]
        await asyncio.gather(*futures)

    async def close(self) -> None:
        if self._dlq_producer is not None:
            await self._dlq_producer.close()
        self.chain.close()
