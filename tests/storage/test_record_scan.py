"""Reading records inside stored batches (storage._record_scan): every codec, streamed across
decompressed pieces, malformed sections, and the decompression limit."""

from __future__ import annotations

import os

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from storage_batches import hbatch, kbatch, zeros_batch

from odradek.protocol import batch as batch_format
from odradek.protocol import batch_builder, errors, record_batch, records
from odradek.protocol import compression as codecs
from odradek.storage import _record_scan as scan

LIMIT = scan.DEFAULT_LIMIT
T0 = 1_700_000_000_000


def heads(data: bytes, limit: int = LIMIT) -> list[tuple[int, int, bool]]:
    return [(r[0], r[1], r[2] is None) for r in scan.iter_record_heads(data, 0, batch_format.read_header(data), limit)]


def expected_heads(data: bytes) -> list[tuple[int, int, bool]]:
    h = batch_format.read_header(data)
    return [(r.offset - h.base_offset, r.timestamp - h.base_timestamp, r.key is None) for r in record_batch.decode_batch(data)]


@pytest.mark.parametrize("codec", [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD])
def test_heads_of_every_codec(codec):
    recs = [records.NewRecord(None if i % 3 == 0 else b"k%d" % i, b"v" * i, (), T0 + i * 7) for i in range(50)]
    data = batch_builder.build_batch(recs, compression=codec)
    assert heads(data) == expected_heads(data)
    assert scan.null_key_indices(data, 0, batch_format.read_header(data), LIMIT) == [i for i in range(50) if i % 3 == 0]


def test_records_spanning_many_decompressed_pieces():
    # ~3.5 MiB of records, some larger than a piece, some split across pieces: the stream
    # gives the same heads as decoding the whole section.
    sizes = [10, codecs.CHUNK_BYTES + 5, 100, 7, codecs.CHUNK_BYTES // 2, 3, codecs.CHUNK_BYTES, 1]
    recs = [
        records.NewRecord(None if i == 4 else b"key-%d" % i, os.urandom(16) * (n // 16 + 1), (), T0 + i)
        for i, n in enumerate(sizes * 2)
    ]
    for codec in (codecs.GZIP, codecs.SNAPPY, codecs.LZ4, codecs.ZSTD):
        data = batch_builder.build_batch(recs, compression=codec)
        assert heads(data) == expected_heads(data)


def test_timestamps_of_create_time_and_log_append_time_batches():
    data = hbatch([T0 + 30, T0 + 10, T0 + 20], base_offset=100, codec=codecs.ZSTD)
    h = batch_format.read_header(data)
    assert list(scan.iter_record_timestamps(data, 0, h, LIMIT)) == [(100, T0 + 30), (101, T0 + 10), (102, T0 + 20)]
    lat = bytearray(data)
    batch_format.set_log_append_time(lat, 0, T0 + 99)
    h = batch_format.read_header(lat)
    assert list(scan.iter_record_timestamps(lat, 0, h, LIMIT)) == [(100, T0 + 99), (101, T0 + 99), (102, T0 + 99)]


@pytest.mark.parametrize("codec", [codecs.NONE, codecs.ZSTD])
def test_wrong_record_counts_are_invalid(codec):
    for count in (2, 4):  # three records inside
        data = hbatch([T0, T0 + 1, T0 + 2], record_count=count, codec=codec)
        with pytest.raises(errors.InvalidRecordError):
            heads(data)


def test_a_streamed_section_cut_inside_a_record_is_invalid():
    big = batch_builder.build_batch([records.NewRecord(b"k", bytes(3 << 20))], compression=codecs.GZIP)
    h = batch_format.read_header(big)
    # Claim a second record that is not there.
    forged = bytearray(big)
    batch_format._INT32.pack_into(forged, 57, 2)
    batch_format._INT32.pack_into(forged, 23, 1)
    batch_format.write_crc(forged)
    with pytest.raises(errors.InvalidRecordError):
        heads(bytes(forged))
    assert heads(big) == [(0, 0, False)] and h.record_count == 1


def test_a_batch_past_the_limit_is_refused_before_it_is_decompressed():
    data = zeros_batch(8 << 20)
    assert heads(data, limit=9 << 20) == [(0, 0, False)]
    with pytest.raises(codecs.DecompressedTooLargeError):
        heads(data, limit=4 << 20)
    with pytest.raises(codecs.DecompressedTooLargeError):
        scan.batch_records_buffer(data, 0, batch_format.read_header(data), 4 << 20)


def test_the_limit_follows_max_message_bytes():
    assert scan.decompressed_batch_limit(1024) == 64 << 20  # never below 64 MiB
    assert scan.decompressed_batch_limit(1048588) == 64 * 1048588
    assert scan.decompressed_batch_limit(10 << 20) == 640 << 20


def test_uncompressed_batches_need_no_copy():
    data = kbatch(3)
    buf, start, end = scan.batch_records_buffer(data, 0, batch_format.read_header(data), LIMIT)
    assert buf is data and (start, end) == (batch_format.HEADER_SIZE, len(data))


def test_end_txn_marker_of_a_legacy_message_is_none():
    # A legacy (magic 0/1) message is never a control batch: no marker, no AttributeError.
    builder = LegacyRecordBatchBuilder(1, codecs.NONE, 1 << 20)
    builder.append(0, timestamp=T0, key=b"k", value=b"v")
    assert scan.end_txn_marker(bytes(builder.build())) is None
