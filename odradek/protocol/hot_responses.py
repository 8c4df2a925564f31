"""Produce and Fetch response bodies, packed by hand.

kio's writer costs tens of microseconds per response, which is most of the broker's CPU
for small requests; these two responses are packed directly instead. Each function takes
plain tuples and returns a list of buffers, so record data (the bytes of a Fetch) is
passed through without being copied. Layouts follow Kafka's ProduceResponse.json and
FetchResponse.json; the tests compare the output with kio's writer field by field.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    import uuid

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

PRODUCE_FLEXIBLE_FROM = 9
PRODUCE_TOPIC_IDS_FROM = 13
FETCH_FLEXIBLE_FROM = 12
FETCH_TOPIC_IDS_FROM = 13


_ONE_BYTE_VARINTS = [bytes((v,)) for v in range(0x80)]


def _uvarint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _ONE_BYTE_VARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _array_len(n: int, flexible: bool) -> bytes:
    return _uvarint(n + 1) if flexible else _I32.pack(n)


def _string(s: str, flexible: bool) -> bytes:
    raw = s.encode()
    return (_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


_NULL_STRING = {False: _I16.pack(-1), True: b"\x00"}
_NO_TAGS = b"\x00"


# (index, error_code, base_offset, log_append_time, log_start_offset, error_message
#  [, record_errors]): record_errors (v8+, KIP-467) is [(batch_index, message or None), ...].
PartitionProduceResult = tuple


# The fixed fields of a partition's result and how many of the tuple's items they take.
_RESULT_V0 = (struct.Struct(">ihq"), 3)  # index, error code, base offset
_RESULT_V2 = (struct.Struct(">ihqq"), 4)  # + log append time
_RESULT_V5 = (struct.Struct(">ihqqq"), 5)  # + log start offset


def produce_response(
    version: int, topics: list[tuple[str | uuid.UUID, list[PartitionProduceResult]]], throttle_ms: int = 0
) -> list[bytes]:
    """ProduceResponse body (v0+): ``topics`` is [(name, [(index, error, base_offset,
    log_append_time, log_start_offset, error_message[, record_errors]), ...]), ...], where a
    topic is its name up to v12 and its id (a ``uuid.UUID``) from v13 (KIP-516)."""
    flexible = version >= PRODUCE_FLEXIBLE_FROM
    by_id = version >= PRODUCE_TOPIC_IDS_FROM
    fixed, n_fixed = _RESULT_V5 if version >= 5 else _RESULT_V2 if version >= 2 else _RESULT_V0
    with_errors = version >= 8  # record_errors and error_message
    no_record_errors = _array_len(0, flexible)
    null_string = _NULL_STRING[flexible]
    out = [_array_len(len(topics), flexible)]
    append = out.append
    for topic, partitions in topics:
        # the version decides, not the type: a name (str) up to v12, a topic id (UUID) from v13
        append(cast("uuid.UUID", topic).bytes if by_id else _string(cast(str, topic), flexible))
        append(_array_len(len(partitions), flexible))
        for result in partitions:
            append(fixed.pack(*result[:n_fixed]))
            if with_errors:
                message = result[5]
                record_errors = result[6] if len(result) > 6 else None
                if record_errors:
                    append(_record_errors(record_errors, flexible))
                else:
                    append(no_record_errors)
                append(null_string if message is None else _string(message, flexible))
            if flexible:
                append(_NO_TAGS)
        if flexible:
            append(_NO_TAGS)
    if version >= 1:
        append(_I32.pack(throttle_ms))  # throttle_time_ms
    if flexible:
        append(_NO_TAGS)
    return [b"".join(out)]  # small: one buffer is cheaper to frame and send than a dozen


def produce_throttle_at(version: int) -> int | None:
    """Where throttle_time_ms lies in ``produce_response``'s buffer, from its end (None in v0)."""
    if version < 1:
        return None
    return -5 if version >= PRODUCE_FLEXIBLE_FROM else -4


# throttle_time_ms is the first four bytes of ``fetch_response``'s first buffer.
FETCH_THROTTLE_AT = 0


def _record_errors(record_errors, flexible: bool) -> bytes:
    """The ``record_errors`` array: (batch_index int32, batch_index_error_message)."""
    null_string = _NULL_STRING[flexible]
    out = [_array_len(len(record_errors), flexible)]
    for index, message in record_errors:
        out.append(_I32.pack(index))
        out.append(null_string if message is None else _string(message, flexible))
        if flexible:
            out.append(_NO_TAGS)
    return b"".join(out)


_SIZE_AND_CORRELATION = struct.Struct(">ii")
_ONE_PARTITION_FRAMES: dict[tuple[int, str], tuple[int, bytes, struct.Struct, int, bytes]] = {}


def one_partition_produce_frame(
    version: int,
    correlation_id: int,
    topic: str,
    partition: int,
    base_offset: int,
    log_append_time: int,
    log_start_offset: int,
) -> bytes:
    """A whole ProduceResponse frame (size, header, body) for one partition's success:
    the fast lane's answer. Per version and topic, the bytes around the numbers are
    taken once from ``produce_response`` and kept."""
    key = (version, topic)
    template = _ONE_PARTITION_FRAMES.get(key)
    if template is None:
        template = _one_partition_template(version, topic)
        if len(_ONE_PARTITION_FRAMES) >= 4096:
            _ONE_PARTITION_FRAMES.clear()
        _ONE_PARTITION_FRAMES[key] = template
    size, head, fixed, n_fixed, tail = template
    numbers = (partition, 0, base_offset, log_append_time, log_start_offset)[:n_fixed]
    return b"".join((_SIZE_AND_CORRELATION.pack(size, correlation_id), head, fixed.pack(*numbers), tail))


def _one_partition_template(version: int, topic: str) -> tuple[int, bytes, struct.Struct, int, bytes]:
    flexible = version >= PRODUCE_FLEXIBLE_FROM
    fixed, n_fixed = _RESULT_V5 if version >= 5 else _RESULT_V2 if version >= 2 else _RESULT_V0
    (body,) = produce_response(version, [(topic, [(0, 0, 0, -1, 0, None)])])
    head = _array_len(1, flexible) + _string(topic, flexible) + _array_len(1, flexible)
    tail = body[len(head) + fixed.size :]
    header_tags = b"\x00" if flexible else b""  # response header v1 from the flexible versions
    return 4 + len(header_tags) + len(body), header_tags + head, fixed, n_fixed, tail


# (partition, error_code, high_watermark, last_stable_offset, log_start_offset,
#  aborted_transactions: list[(producer_id, first_offset)] | None, records: buffer | None
#  [, preferred_read_replica [, diverging_epoch: (epoch, end_offset)]])
PartitionFetchResult = tuple

_EPOCH_END_OFFSET = struct.Struct(">iq")


def fetch_response(
    version: int,
    topics: list[tuple[str | uuid.UUID, list[PartitionFetchResult]]],
    *,
    error_code: int = 0,
    session_id: int = 0,
    throttle_ms: int = 0,
) -> list:
    """FetchResponse v4..v17 body; record buffers are included as given (not copied). Topics
    are named by name up to v12 and by topic id (a ``uuid.UUID``) from v13 (KIP-516). A
    partition is ``(index, error, hw, lso, log start, aborted, records[, preferred read
    replica[, diverging epoch]])``; the diverging epoch ``(epoch, end offset)`` (v12+,
    KIP-595) goes out as the partition's tagged field 0."""
    flexible = version >= FETCH_FLEXIBLE_FROM
    by_id = version >= FETCH_TOPIC_IDS_FROM
    out = [_I32.pack(throttle_ms)]  # throttle_time_ms
    append = out.append
    if version >= 7:
        append(struct.pack(">hi", error_code, session_id))
    append(_array_len(len(topics), flexible))
    for name, partitions in topics:
        # The version decides, not the type: a name (str) up to v12, a topic id (UUID) from v13.
        append(name.bytes if by_id else _string(name, flexible))  # type: ignore[union-attr,arg-type]
        append(_array_len(len(partitions), flexible))
        for entry in partitions:
            diverging = None
            if len(entry) == 7:
                partition, error, hw, lso, start_offset, aborted, records = entry
                preferred = -1
            elif len(entry) == 8:  # KIP-392: an 8th item names the preferred read replica
                partition, error, hw, lso, start_offset, aborted, records, preferred = entry
            else:  # a 9th: where the fetcher's log diverged from this one (KIP-595, v12+)
                partition, error, hw, lso, start_offset, aborted, records, preferred, diverging = entry
            append(struct.pack(">ihqq", partition, error, hw, lso))
            if version >= 5:
                append(_I64.pack(start_offset))
            if aborted is None:
                append(b"\x00" if flexible else _I32.pack(-1))
            else:
                append(_array_len(len(aborted), flexible))
                for producer_id, first_offset in aborted:
                    append(struct.pack(">qq", producer_id, first_offset))
                    if flexible:
                        append(_NO_TAGS)
            if version >= 11:
                append(_I32.pack(preferred))  # preferred_read_replica
            if records is None:
                append(b"\x00" if flexible else _I32.pack(-1))
            else:
                size = len(records)
                append(_uvarint(size + 1) if flexible else _I32.pack(size))
                if size:
                    append(records)
            if diverging is not None and flexible:
                # one tagged field: tag 0, 13 bytes (epoch int32, end offset int64, no tags)
                append(b"\x01\x00\x0d" + _EPOCH_END_OFFSET.pack(*diverging) + _NO_TAGS)
            elif flexible:
                append(_NO_TAGS)
        if flexible:
            append(_NO_TAGS)
    if flexible:
        append(_NO_TAGS)
    return out
