"""Checks of one v2 batch on the produce path, from its header and bytes, records not decoded.

Small named checks, each raising Kafka's error, in the order Kafka applies them
(UnifiedLog.analyzeAndValidateRecords, then LogValidator.validateBatch); the CRC check is
the only one that reads the whole batch. Storage's ``LogValidator`` runs them.

Errors: ``CorruptMessageError`` for bytes that fail the checksum or do not parse as a
batch, ``InvalidRecordError`` for counts and fields that break a batch-level rule,
``MessageTooLargeError`` for a batch over ``max.message.bytes``,
``UnsupportedCompressionTypeError`` for unknown codecs.
"""

from __future__ import annotations

import crc32c

from odradek.protocol import compression as codecs
from odradek.protocol import errors
from odradek.protocol.batch import ATTRIBUTES_OFFSET, HEADER_SIZE, BatchHeader


def check_batch_magic(magic: int) -> None:
    if magic > 2 or magic < 0:
        raise errors.CorruptMessageError(f"invalid magic byte {magic}")
    if magic < 2:
        raise errors.InvalidRecordError(
            f"record batch with magic {magic} where v2 is required (legacy message sets go through validate_legacy)"
        )


def check_batch_size(buf, pos: int, header: BatchHeader, end: int | None = None) -> None:
    """The batch is at least a header long and its declared length is all there."""
    size = header.size
    if size < HEADER_SIZE:
        raise errors.CorruptMessageError(
            f"record batch size {size} is smaller than the minimum batch overhead {HEADER_SIZE}"
        )
    available = (len(buf) if end is None else end) - pos
    if size > available:
        raise errors.CorruptMessageError(
            f"record batch declares {size} bytes but only {available} are present"
        )


def check_max_message_bytes(header: BatchHeader, max_message_bytes: int) -> None:
    """Kafka's RecordTooLargeException, whose code is MESSAGE_TOO_LARGE."""
    if header.size > max_message_bytes:
        raise errors.MessageTooLargeError(
            f"the record batch is {header.size} bytes, over the maximum of {max_message_bytes}"
        )


def check_batch_crc(buf, pos: int, header: BatchHeader) -> None:
    crc = crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + header.size])
    if crc != header.crc:
        raise errors.CorruptMessageError(f"record batch is corrupt (stored crc {header.crc}, computed {crc})")


def check_compression_codec(header: BatchHeader) -> None:
    if header.compression > codecs.ZSTD:
        raise errors.UnsupportedCompressionTypeError(f"unknown compression codec id {header.compression}")


def check_record_count(header: BatchHeader, *, from_client: bool = True) -> None:
    """Record count against the offset range.

    From a client the batch must be dense: count > 0 and lastOffsetDelta + 1 == count.
    Batches written by the broker itself (replication, recovery) may have gaps left by
    compaction, or no records at all, but never more records than offsets.
    """
    count = header.record_count
    span = header.last_offset_delta + 1
    if from_client:
        if span <= 0:
            raise errors.InvalidRecordError(
                f"batch has an invalid offset range: lastOffsetDelta {header.last_offset_delta}"
            )
        if count <= 0:
            raise errors.InvalidRecordError(f"invalid reported count for record batch: {count}")
        if span != count:
            raise errors.InvalidRecordError(
                f"inconsistent batch offset range ({span} offsets) and count of records {count}"
            )
    elif count < 0 or count > max(span, 0):
        raise errors.InvalidRecordError(f"record count {count} does not fit offset range of {span} offsets")


def check_client_batch_fields(header: BatchHeader) -> None:
    """What a producer may not send: control batches, idempotent batches without a sequence."""
    if header.is_control:
        raise errors.InvalidRecordError("clients are not allowed to write control records")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise errors.InvalidRecordError(
            f"invalid sequence number {header.base_sequence} in a batch with producerId {header.producer_id}"
        )

