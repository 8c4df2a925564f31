"""Reading v2 record batches: one batch, or every batch of a fetch response or log slice.

:func:`iter_batches` walks the batches of a buffer (v2 :class:`RecordBatch`, or legacy
``LegacyBatch``), :func:`decode_batch` reads one, :func:`iter_records` every record. A
``RecordBatch`` keeps its bytes and decodes its records only when asked: ``records(cls)``
straight into a client's own tuple subclass (through ``record_decoders``),
``raw_records()`` with their deltas, ``end_txn_marker()`` for a control batch.

The rest of the record codec, by who calls it:

* producers: ``batch_builder`` (:func:`~odradek.protocol.batch_builder.build_batch`,
  ``BatchBuilder``);
* the broker's produce path: ``batch_checks`` (header checks and the CRC),
  ``legacy_records`` (validating and converting magic 0/1 message sets), and here
  :func:`recompress_batch` and :func:`records_have_null_keys`;
* transactions: ``control_records`` (markers);
* storage (cleaner, recovery): ``records.scan_records`` and ``batch_builder.encode_batch``.

Errors are Kafka's: ``CorruptMessageError`` for bytes that fail a checksum or do not
parse as a batch, ``InvalidRecordError`` for records that parse badly.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import crc32c

from odradek.protocol import compression as codecs
from odradek.protocol import errors
from odradek.protocol.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CREATE_TIME,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    read_header,
)
from odradek.protocol.batch_builder import batch_attributes, encode_batch
from odradek.protocol.batch_checks import check_batch_magic, check_batch_size
from odradek.protocol.control_records import (
    ABORT,
    COMMIT,
    EndTxnMarker,
    decode_control_key,
    decode_end_txn_marker,
)
from odradek.protocol.legacy_records import MIN_MESSAGE_SIZE_V0, LegacyBatch, read_legacy_message
from odradek.protocol.record_decoders import decode_records
from odradek.protocol.records import DecodedRecord, Record, as_bytes, decode_records_one_by_one

_OFFSET_AND_SIZE = struct.Struct(">qi")


class RecordBatch:
    """One v2 batch: its parsed header and its bytes, records decoded on demand.

    Iterating yields :class:`DecodedRecord` (absolute offsets and timestamps).
    """

    __slots__ = ("header", "_buf", "_pos")
    magic = 2

    def __init__(self, buf: bytes, pos: int, header: BatchHeader):
        self.header = header
        self._buf = buf
        self._pos = pos

    def __repr__(self) -> str:
        h = self.header
        return (
            f"RecordBatch(base_offset={h.base_offset}, last_offset={h.last_offset}, "
            f"count={h.record_count}, codec={codecs.CODEC_NAMES.get(h.compression, h.compression)}, "
            f"size={h.size}{', control' if h.is_control else ''})"
        )

    @property
    def data(self) -> bytes:
        """The batch's bytes, exactly."""
        return self._buf[self._pos : self._pos + self.header.size]

    base_offset = property(lambda self: self.header.base_offset)
    last_offset = property(lambda self: self.header.last_offset)
    next_offset = property(lambda self: self.header.next_offset)
    size = property(lambda self: self.header.size)
    compression = property(lambda self: self.header.compression)
    timestamp_type = property(lambda self: self.header.timestamp_type)
    is_transactional = property(lambda self: self.header.is_transactional)
    is_control = property(lambda self: self.header.is_control)
    producer_id = property(lambda self: self.header.producer_id)
    producer_epoch = property(lambda self: self.header.producer_epoch)
    base_sequence = property(lambda self: self.header.base_sequence)
    max_timestamp = property(lambda self: self.header.max_timestamp)

    def crc_is_valid(self) -> bool:
        h = self.header
        return (
            crc32c.crc32c(memoryview(self._buf)[self._pos + ATTRIBUTES_OFFSET : self._pos + h.size]) == h.crc
        )

    def _payload(self) -> tuple[bytes, int, int]:
        """The (decompressed) records section as ``(data, start, end)``."""
        h = self.header
        start = self._pos + HEADER_SIZE
        end = self._pos + h.size
        if h.compression == codecs.NONE:
            return self._buf, start, end
        data = codecs.decompress(h.compression, memoryview(self._buf)[start:end])
        return data, 0, len(data)

    def raw_records(self) -> list[Record]:
        """The records with their deltas, as stored."""
        data, start, end = self._payload()
        return decode_records_one_by_one(data, start, end, self.header.record_count, Record, 0, 0, None)

    def records(self, cls: type = DecodedRecord) -> list:
        """The records with absolute offsets and timestamps, as ``cls`` tuples.

        ``cls`` is :class:`DecodedRecord` or any tuple subclass taking ``(offset,
        timestamp, key, value, headers)``; it is built with ``tuple.__new__`` (its own
        ``__new__`` is not called), so a client can decode into its own record class.
        """
        h = self.header
        data, start, end = self._payload()
        fixed = h.max_timestamp if h.attributes & TIMESTAMP_TYPE_BIT else None
        return decode_records(data, start, end, h.record_count, cls, h.base_offset, h.base_timestamp, fixed)

    def __iter__(self) -> Iterator[DecodedRecord]:
        return iter(self.records())

    def end_txn_marker(self) -> EndTxnMarker | None:
        """The transaction marker in a control batch (None for other batches)."""
        if not self.header.is_control:
            return None
        records = self.raw_records()
        if not records:
            return None
        _, control_type = decode_control_key(records[0].key)
        if control_type not in (ABORT, COMMIT):
            return None
        _, coordinator_epoch = decode_end_txn_marker(records[0].value)
        return EndTxnMarker(control_type, coordinator_epoch)


def decode_batch(buf, pos: int = 0, *, check_crc: bool = True) -> RecordBatch | LegacyBatch:
    """The complete batch at ``pos`` (v2, or a legacy message); CorruptMessageError if cut short."""
    data, pos, end = as_bytes(buf, pos, None)
    if pos + LOG_OVERHEAD + 5 > end:
        raise errors.CorruptMessageError("buffer too short for a record batch")
    magic = data[pos + MAGIC_OFFSET]
    if magic < 2:
        legacy = read_legacy_message(data, pos, end)
        if legacy is None:
            raise errors.CorruptMessageError("legacy message runs past the end of the buffer")
        if check_crc and not legacy.crc_is_valid():
            raise errors.CorruptMessageError(f"legacy message at offset {legacy.offset} fails its CRC")
        return legacy
    check_batch_magic(magic)
    if pos + HEADER_SIZE > end:
        raise errors.CorruptMessageError("buffer too short for a record batch header")
    header = read_header(data, pos)
    check_batch_size(data, pos, header, end)
    batch = RecordBatch(data, pos, header)
    if check_crc and not batch.crc_is_valid():
        raise errors.CorruptMessageError(
            f"record batch at offset {header.base_offset} is corrupt (stored crc {header.crc})"
        )
    return batch


def iter_batches(
    buf, pos: int = 0, end: int | None = None, *, check_crc: bool = True
) -> Iterator[RecordBatch | LegacyBatch]:
    """Each complete batch in ``buf[pos:end]``, v2 or legacy, in order.

    Stops quietly at an incomplete trailing batch (fetch responses may end with one).
    Raises CorruptMessageError, as Kafka's log reader does, for a length too small to
    be a message, an unknown magic, and (unless ``check_crc=False``) a failed CRC.
    """
    data, pos, end = as_bytes(buf, pos, end)
    while pos + LOG_OVERHEAD <= end:
        _, length = _OFFSET_AND_SIZE.unpack_from(data, pos)
        if length < MIN_MESSAGE_SIZE_V0:
            raise errors.CorruptMessageError(f"batch length {length} is below the minimum message overhead")
        size = length + LOG_OVERHEAD
        if pos + MAGIC_OFFSET >= end:
            return
        magic = data[pos + MAGIC_OFFSET]
        if magic > 2:
            raise errors.CorruptMessageError(f"invalid magic byte {magic}")
        if pos + size > end:
            return
        batch: RecordBatch | LegacyBatch | None
        if magic == 2:
            header = read_header(data, pos) if size >= HEADER_SIZE else None
            if header is None:
                raise errors.CorruptMessageError(f"record batch size {size} is below the header size")
            batch = RecordBatch(data, pos, header)
            offset = header.base_offset
        else:
            batch = read_legacy_message(data, pos, end)
            assert batch is not None, "the size check above saw the whole message"
            offset = batch.offset  # not base_offset, which decompresses a wrapper
        if check_crc and not batch.crc_is_valid():
            raise errors.CorruptMessageError(f"batch at offset {offset} fails its CRC")
        yield batch
        pos += size


def iter_records(buf, pos: int = 0, end: int | None = None, *, include_control: bool = False):
    """Every record of every complete batch in ``buf``, control batches left out by default."""
    for batch in iter_batches(buf, pos, end):
        if batch.is_control and not include_control:
            continue
        yield from batch.records()


def records_have_null_keys(batch) -> bool:
    """Whether any record lacks a key (compacted topics reject those: INVALID_RECORD)."""
    if not isinstance(batch, (RecordBatch, LegacyBatch)):
        batch = decode_batch(batch)
    if isinstance(batch, LegacyBatch):
        return any(r.key is None for r in batch.records())
    return any(r.key is None for r in batch.raw_records())


def recompress_batch(buf, target_codec: int, *, pos: int = 0, compression_level: int | None = None) -> bytes:
    """The batch at ``pos`` with its records compressed by ``target_codec`` instead.

    Everything else is kept: offsets and deltas, timestamps, producer fields, the
    partition leader epoch and the other attribute bits. Checks the CRC first, so a
    corrupt batch is not given a fresh checksum.
    """
    batch = decode_batch(buf, pos)
    if not isinstance(batch, RecordBatch):
        raise errors.UnsupportedForMessageFormatError("recompress_batch handles v2 batches only")
    h = batch.header
    if h.compression == target_codec:
        return batch.data
    records = batch.raw_records()
    batch_attributes(target_codec, CREATE_TIME, False, False)  # validates the codec
    return encode_batch(
        records,
        base_offset=h.base_offset,
        base_timestamp=h.base_timestamp,
        max_timestamp=h.max_timestamp,
        last_offset_delta=h.last_offset_delta,
        attributes=(h.attributes & ~COMPRESSION_MASK) | target_codec,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        partition_leader_epoch=h.partition_leader_epoch,
        compression_level=compression_level,
    )
