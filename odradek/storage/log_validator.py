"""LogValidator: checks a Produce request's record batches for one log and gets them ready to
be written, offsets assigned (Kafka's LogValidator, with the per-batch checks of
UnifiedLog.analyzeAndValidateRecords).

Each v2 batch goes through the protocol's named checks, each with Kafka's error
(``protocol.records.check_*``): magic, size, ``max.message.bytes``, CRC-32C, codec, record
count against the offset delta (dense), and, from a client, no control batch and no producer
id without a sequence. Then what the topic asks for, reading inside the batch only for
that: keys on a compacted topic (a null key is INVALID_RECORD, each such record named,
KIP-467), each record's timestamp when the batch's first or max timestamp is out of the
topic's ``message.timestamp.before/after.max.ms`` (INVALID_TIMESTAMP, per record), and the
records of a batch whose codec is not the topic's ``compression.type`` (recompressed).
Nothing else decompresses: a batch written as it came is never looked into.

Offsets are assigned by writing a new 16-byte prefix (base offset, length, partition
leader epoch: outside the CRC) ahead of the untouched rest of the batch, which goes to
``os.writev`` as a memoryview of the request: no copy. A LogAppendTime topic or a
recompression rewrites a copy of the batch.

Decompression limit. A batch is at most ``max.message.bytes`` on the wire, but a few KB of
zstd can hold hundreds of MB. Reading keys and timestamps streams through the codec (one
decompressed piece held at a time, see _record_scan); recompression holds the whole
records section. Both stop at ``decompressed_batch_limit(max.message.bytes)``, 64 times
``max.message.bytes`` and at least 64 MiB, and refuse the batch with MESSAGE_TOO_LARGE
(``DecompressedTooLargeError``, logged). Real producers stay far below it: librdkafka's
batches are at most ``batch.size`` = ``message.max.bytes`` (1 MB) uncompressed; the Java
producer closes a batch when its compressed estimate reaches ``batch.size`` (16 KiB by
default), so its batches pass unless the data compresses better than 4096:1 (1:64 with
``batch.size`` raised to 1 MiB), and a refused batch is split and resent by the Java
producer (MESSAGE_TOO_LARGE with more than one record). A topic that allows larger batches
gets a proportionally larger limit. The same limit bounds the cleaner and ListOffsets.

The producer-state checks (duplicates, sequences, producer epochs, transaction markers)
belong to the log (``Log.append_as_leader``), as in Kafka.

``plain_batch`` is the produce hot path's check: one batch, no producer id, nothing to
rewrite or read inside; it answers None for anything else, and the log then takes the
general path, which raises the error that explains a bad batch.

Thread rules: one validator per log, rebuilt when its config changes (``Log.update_config``);
called from the log owner's thread; it keeps nothing between calls.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence

import crc32c

from ..protocol import batch as batch_format
from ..protocol import compression as codecs
from ..protocol import errors
from ..protocol.batch_checks import (
    check_batch_crc,
    check_batch_magic,
    check_batch_size,
    check_client_batch_fields,
    check_compression_codec,
    check_max_message_bytes,
    check_record_count,
)
from ..protocol.records import scan_records
from ._record_scan import (
    batch_records_buffer,
    build_batch,
    decompressed_batch_limit,
    end_txn_marker,
    iter_record_timestamps,
    null_key_indices,
)
from .log_config import COMPRESSION_CODECS, LONG_MAX, LogConfig
from .segment import stored_batch_problem

_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_pack_prefix = _PREFIX.pack
_crc = crc32c.crc32c
_ATTR = batch_format.ATTRIBUTES_OFFSET
_CONTROL = batch_format.CONTROL_BIT
_NOT_PLAIN = batch_format.CONTROL_BIT | batch_format.TRANSACTIONAL_BIT
_NO_TS = batch_format.NO_TIMESTAMP
_header_fields = batch_format.header_fields
_read_header = batch_format.read_header

_log = logging.getLogger(__name__)


class ValidatedAppend:
    """What ``LogValidator.validate`` hands the log to write: ``parts`` for one writev of
    ``total`` bytes, ``infos`` (size, last offset, max timestamp) per batch for the
    segment's indexes, and ``producer_batches`` (header, base offset, transaction marker
    or None) of the batches that carry a producer id, for the producer state."""

    __slots__ = (
        "parts",
        "total",
        "infos",
        "first_offset",
        "last_offset",
        "max_timestamp",
        "offset_of_max_timestamp",
        "record_count",
        "log_append_time",
        "producer_batches",
    )

    def __init__(
        self, parts, total, infos, first_offset, last_offset, max_ts, offset_of_max, records, lat, producers
    ):
        self.parts = parts
        self.total = total
        self.infos = infos
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.max_timestamp = max_ts
        self.offset_of_max_timestamp = offset_of_max
        self.record_count = records
        self.log_append_time = lat
        self.producer_batches = producers


class LogValidator:
    """The checks and offset assignment of one log's appends (no files: it works on the
    request's bytes). Built by its Log from the topic config; called from the log owner's
    thread by ``Log.append_as_leader``/``_append_plain_batch`` and ``append_as_follower``."""

    __slots__ = (
        "name",
        "max_message_bytes",
        "codec",
        "log_append_time",
        "ts_before",
        "ts_after",
        "compact",
        "plain",
        "decompressed_limit",
        "_levels",
    )

    def __init__(
        self,
        config: LogConfig,
        name: str,
        *,
        timestamp_type: int | str | None = None,
        max_message_bytes: int | None = None,
        compression_type: str | None = None,
    ):
        """The validator of the log ``name`` (``topic-partition``, for messages) under
        ``config``; the keyword arguments override the config (per call, in tests)."""
        self.name = name
        if timestamp_type is None:
            timestamp_type = config.timestamp_type
        elif isinstance(timestamp_type, str):
            timestamp_type = (
                batch_format.LOG_APPEND_TIME
                if timestamp_type == "LogAppendTime"
                else batch_format.CREATE_TIME
            )
        self.log_append_time = timestamp_type == batch_format.LOG_APPEND_TIME
        self.max_message_bytes = config.max_message_bytes if max_message_bytes is None else max_message_bytes
        if compression_type is None:
            self.codec = config.compression_codec
        else:
            self.codec = COMPRESSION_CODECS.get(compression_type)
        self.ts_before = config.timestamp_before_max_ms
        self.ts_after = config.timestamp_after_max_ms
        self.compact = config.compact
        self.decompressed_limit = decompressed_batch_limit(self.max_message_bytes)
        # Only a level the topic changed from Kafka's default is passed on; else the codec's.
        levels = {1: (config.compression_gzip_level, -1), 3: (config.compression_lz4_level, 9)}
        levels[4] = (config.compression_zstd_level, 3)
        self._levels = {
            codec: None if level == default else level for codec, (level, default) in levels.items()
        }
        # Whether a batch may be written as it came after the header checks alone: no key
        # check (compaction), no broker timestamp, no timestamp bounds. See plain_batch.
        self.plain = (
            not self.compact
            and not self.log_append_time
            and self.ts_before == LONG_MAX
            and self.ts_after == LONG_MAX
        )

    # ---- the hot path ---------------------------------------------------------------------

    def plain_batch(self, buf, base_offset: int, leader_epoch: int) -> tuple | None:
        """If ``buf`` is one valid v2 batch, in the topic's codec, that may be written as it
        came (no producer id, transactional or control bit; and ``self.plain``, the
        caller's check): ``(parts, size, last_offset, max_timestamp, record_count)``, its
        offsets assigned from ``base_offset`` as ``validate`` does. None, having looked at
        nothing but the header and the CRC, for anything else."""
        if len(buf) < batch_format.HEADER_SIZE:
            return None
        _, batch_length, _, magic, crc, attributes, delta, _, max_ts, pid, _, _, count = _header_fields(buf)
        size = batch_length + 12
        mv = memoryview(buf)
        if (
            size != len(buf)
            or magic != 2
            or pid >= 0
            or attributes & _NOT_PLAIN
            or count <= 0
            or delta != count - 1
            or size > self.max_message_bytes
            or (self.codec is not None and self.codec != attributes & 7)
            or _crc(mv[_ATTR:]) != crc
        ):
            return None
        if max_ts < _NO_TS:  # a negative timestamp counts as none, as in the general path
            max_ts = _NO_TS
        parts = [_pack_prefix(base_offset, batch_length, leader_epoch), mv[16:]]
        return parts, size, base_offset + delta, max_ts, count

    # ---- every batch ----------------------------------------------------------------------

    def validate(
        self, buf, first_offset: int, leader_epoch: int, now_ms: int, *, from_client: bool = True
    ) -> ValidatedAppend:
        """Check every v2 batch of ``buf`` (a Produce request's records for this partition)
        and assign offsets from ``first_offset``. Raises a KafkaError subclass for the first
        batch that fails; nothing is changed anywhere then.

        ``from_client``: False for the group and transaction coordinators' own writes
        (Kafka's AppendOrigin.COORDINATOR): control batches are allowed (each must hold a
        transaction marker), sequences are not required."""
        mv = memoryview(buf)
        total_len = len(mv)
        log_append_time = self.log_append_time
        codec = self.codec
        max_message_bytes = self.max_message_bytes
        check_ts = not log_append_time and (self.ts_before != LONG_MAX or self.ts_after != LONG_MAX)
        parts: list[bytes | bytearray | memoryview] = []
        infos = []
        producer_batches = []
        next_offset = first_offset
        records = 0
        max_ts = _NO_TS
        offset_of_max = -1
        pos = 0
        try:
            while pos < total_len:
                h = _read_header(buf, pos) if total_len - pos >= batch_format.HEADER_SIZE else None
                size = end = 0
                if h is not None:
                    size = h.batch_length + 12
                    end = pos + size
                    attributes = h.attributes
                    count = h.record_count
                # The protocol's checks below, fused; when one fails they run one by one
                # (check_batch) to raise the error that explains it.
                if (
                    h is None
                    or h.magic != 2
                    or size < batch_format.HEADER_SIZE
                    or end > total_len
                    or size > max_message_bytes
                    or _crc(mv[pos + _ATTR : end]) != h.crc
                    or attributes & batch_format.COMPRESSION_MASK > codecs.ZSTD
                    or count <= 0
                    or h.last_offset_delta != count - 1
                    or (
                        from_client
                        and (attributes & _CONTROL or (h.producer_id >= 0 and h.base_sequence < 0))
                    )
                    or (h.producer_id < 0 and attributes & batch_format.TRANSACTIONAL_BIT)
                ):
                    self.check_batch(buf, pos, from_client=from_client)
                    raise errors.CorruptMessageError(f"Batch at position {pos} is malformed")  # not reached
                marker = None
                if attributes & _CONTROL:
                    marker = end_txn_marker(mv[pos:end])
                    if marker is None:
                        raise errors.InvalidRecordError("A control batch must hold one transaction marker")
                elif self.compact:
                    self._check_keys(mv, pos, h)
                batch_max_ts = h.max_timestamp
                if check_ts:
                    self._check_timestamps(mv, pos, h, now_ms)
                base = next_offset
                last = base + h.last_offset_delta
                if (codec is not None and codec != attributes & 7) or log_append_time:
                    data = bytearray(mv[pos:end])
                    if codec is not None and codec != attributes & 7:
                        data = bytearray(self._recompressed(mv, pos, h, codec))
                        size = len(data)
                    if log_append_time:
                        batch_format.set_log_append_time(data, 0, now_ms)
                        batch_max_ts = now_ms
                    _PREFIX.pack_into(data, 0, base, size - 12, leader_epoch)
                    parts.append(data)
                else:
                    parts.append(_pack_prefix(base, h.batch_length, leader_epoch))
                    parts.append(mv[pos + 16 : end])
                if h.producer_id >= 0:
                    producer_batches.append((h, base, marker))
                infos.append((size, last, batch_max_ts))
                if batch_max_ts > max_ts:
                    max_ts = batch_max_ts
                    offset_of_max = last
                records += count
                next_offset = last + 1
                pos = end
        except codecs.DecompressedTooLargeError as e:
            _log.warning("Refused a batch for %s: %s", self.name, e.message)
            raise
        if not infos:
            raise errors.CorruptMessageError(f"Records for {self.name} are empty")
        total = 0
        for info in infos:
            total += info[0]
        return ValidatedAppend(
            parts,
            total,
            infos,
            first_offset,
            next_offset - 1,
            max_ts,
            offset_of_max,
            records,
            now_ms if log_append_time else -1,
            producer_batches,
        )

    def check_batch(self, buf, pos: int = 0, *, from_client: bool = True) -> batch_format.BatchHeader:
        """The checks of the v2 batch at ``buf[pos:]`` one by one, in Kafka's order; raises the
        error of the first that fails, else returns the header. (``validate`` runs them fused.)"""
        total_len = len(buf)
        h = self._header(buf, pos, total_len)
        check_batch_size(buf, pos, h)
        check_max_message_bytes(h, self.max_message_bytes)
        check_batch_crc(buf, pos, h)
        check_compression_codec(h)
        check_record_count(h, from_client=from_client)
        if from_client:
            check_client_batch_fields(h)
        if h.producer_id < 0 and h.attributes & batch_format.TRANSACTIONAL_BIT:
            raise errors.InvalidRecordError("A transactional batch needs a producer id")
        return h

    def check_replicated(self, buf, pos: int, size: int) -> batch_format.BatchHeader | None:
        """The checks of a batch the leader wrote, appended as it is by a follower: what a
        stored batch must be (``segment.stored_batch_problem``: size, magic, CRC) and, for v2,
        no more records than offsets (compaction leaves gaps). Returns the v2 header (None for
        a legacy message); CorruptMessageError or InvalidRecordError otherwise."""
        if size < batch_format.LOG_OVERHEAD + 5:
            raise errors.CorruptMessageError(
                f"Replicated batch at position {pos} for {self.name}: size {size}"
            )
        base_offset = batch_format.read_offset_and_size(buf, pos)[0]
        problem = stored_batch_problem(buf, pos, size, base_offset)
        if problem is not None:
            raise errors.CorruptMessageError(
                f"Replicated batch at offset {base_offset} for {self.name} is corrupt: {problem}"
            )
        if buf[pos + batch_format.MAGIC_OFFSET] != 2:
            return None
        h = _read_header(buf, pos)
        check_record_count(h, from_client=False)
        return h

    def _header(self, buf, pos: int, total_len: int) -> batch_format.BatchHeader:
        """The v2 header at ``pos``, after the checks that need only its magic."""
        if total_len - pos > batch_format.MAGIC_OFFSET:
            magic = buf[pos + batch_format.MAGIC_OFFSET]
            if magic in (0, 1):
                # The produce handler converts legacy message sets before they get here.
                raise errors.UnsupportedForMessageFormatError(
                    f"Magic {magic} batches are not accepted; send v2 record batches"
                )
            check_batch_magic(magic)
        if total_len - pos < batch_format.HEADER_SIZE:
            raise errors.CorruptMessageError(
                f"Records for {self.name} are truncated or malformed at byte {pos} of {total_len}"
            )
        return batch_format.read_header(buf, pos)

    def _check_keys(self, mv, pos: int, h: batch_format.BatchHeader) -> None:
        """A compacted topic takes only records with a key (Kafka's LogValidator.validateKey)."""
        keyless = null_key_indices(mv, pos, h, self.decompressed_limit)
        if keyless:
            why = f"Compacted topic cannot accept message without key in topic partition {self.name}"
            raise rejected(errors.InvalidRecordError, h.record_count, [(i, why) for i in keyless])

    def _check_timestamps(self, mv, pos: int, h: batch_format.BatchHeader, now_ms: int) -> None:
        """Timestamps within [now - before.max.ms, now + after.max.ms]. The batch's first and
        max timestamps tell; only when one is out are the records read, to name each."""
        min_ts = now_ms - self.ts_before if self.ts_before < now_ms else -(1 << 63)
        max_ts = now_ms + self.ts_after if self.ts_after < LONG_MAX - now_ms else LONG_MAX
        if all(ts == _NO_TS or min_ts <= ts <= max_ts for ts in (h.base_timestamp, h.max_timestamp)):
            return
        allowed = f"the allowed range [{min_ts}, {max_ts}]"
        bad = [
            (i, f"Timestamp {t} of record {i} is out of {allowed}")
            for i, (_, t) in enumerate(iter_record_timestamps(mv, pos, h, self.decompressed_limit))
            if t != _NO_TS and not min_ts <= t <= max_ts
        ]
        if bad:
            raise rejected(errors.InvalidTimestampError, h.record_count, bad)
        raise errors.InvalidTimestampError(f"Timestamp of the batch at position {pos} is out of {allowed}")

    def _recompressed(self, mv, pos: int, h: batch_format.BatchHeader, codec: int) -> bytes:
        """The batch with its records compressed by ``codec``; every other field kept. The
        records are checked (they must parse and fill the section) and copied as they are."""
        data, start, end = batch_records_buffer(mv, pos, h, self.decompressed_limit)
        scan_records(data, start, end, h.record_count)
        attributes = (h.attributes & ~batch_format.COMPRESSION_MASK) | codec
        body = data[start:end]
        return build_batch(
            h, attributes, h.base_timestamp, h.max_timestamp, h.record_count, body, self._levels.get(codec)
        )


def rejected(error: type[errors.KafkaError], count: int, record_errors: Sequence[tuple[int, str | None]]):
    """The error that rejects a whole batch for some of its records: ``record_errors`` lists
    (index in the batch, why) so the producer can tell the bad records from the rest (KIP-467)."""
    shown = "; ".join(f"record {i}: {why}" for i, why in record_errors[:3] if why)
    more = f" (and {len(record_errors) - 3} more)" if len(record_errors) > 3 else ""
    return error(
        f"{len(record_errors)} of the batch's {count} records were rejected, so none was written: {shown}{more}",
        record_errors=record_errors,
    )
