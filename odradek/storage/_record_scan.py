"""Record-level scanning of v2 batches for compaction, for the key check on compacted topics
and for naming the records a batch is rejected for (KIP-467).

The cleaner needs each record's offset and timestamp deltas, its key, whether its value is
null (a tombstone) and where its bytes start and end, so a retained record can be copied into
a new batch unchanged: :func:`odradek.protocol.records.scan_records` gives exactly that,
skipping values and headers. This module finds a batch's (decompressed) records section.

Pure functions over bytes; thread-safe.
"""

from __future__ import annotations

from ..protocol import batch as B
from ..protocol import compression as codecs
from ..protocol.records import scan_records


def batch_records_buffer(buf, rel: int, header: B.BatchHeader) -> tuple[bytes, int, int]:
    """The records section of the batch at ``buf[rel:]``, decompressed: ``(data, start, end)``."""
    start = rel + B.HEADER_SIZE
    end = rel + header.size
    codec = header.attributes & B.COMPRESSION_MASK
    if codec:
        data = codecs.decompress(codec, memoryview(buf)[start:end])
        return data, 0, len(data)
    if not isinstance(buf, bytes):
        return bytes(memoryview(buf)[start:end]), 0, end - start
    return buf, start, end


def null_key_indices(buf, rel: int, header: B.BatchHeader) -> list[int]:
    """The indexes, within the v2 batch at ``buf[rel:]``, of its records with a null key."""
    data, start, end = batch_records_buffer(buf, rel, header)
    return [i for i, r in enumerate(scan_records(data, start, end, header.record_count)) if r[2] is None]


def record_timestamps(buf, rel: int, header: B.BatchHeader) -> list[int]:
    """Each record's timestamp (base timestamp + delta) in the v2 batch at ``buf[rel:]``."""
    data, start, end = batch_records_buffer(buf, rel, header)
    base = header.base_timestamp
    return [base + r[1] for r in scan_records(data, start, end, header.record_count)]
