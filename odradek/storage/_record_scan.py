"""Record-level scanning of v2 batches for compaction and for the key check on compacted topics.

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


def batch_has_null_key(buf, rel: int, header: B.BatchHeader) -> bool:
    """Whether any record of the v2 batch at ``buf[rel:]`` has a null key."""
    data, start, end = batch_records_buffer(buf, rel, header)
    return any(r[2] is None for r in scan_records(data, start, end, header.record_count))
