"""The bulk record decoders (``record_decoders``) give exactly what the one-by-one decoder gives."""

from __future__ import annotations

import random

import pytest
from record_samples import (
    T0,
)

from odradek.protocol import batch as b
from odradek.protocol import errors
from odradek.protocol.batch_builder import build_batch, encode_batch
from odradek.protocol.record_batch import (
    decode_batch,
)
from odradek.protocol.record_decoders import _decode_fast, _decode_uniform, decode_records
from odradek.protocol.records import (
    DecodedRecord,
    Record,
    decode_records_one_by_one,
)

# -- the bulk decoders -------------------------------------------------------------------


class _MyRecord(tuple):
    __slots__ = ()


@pytest.mark.parametrize("size", [0, 1, 60, 61, 100, 1000, 8200])
@pytest.mark.parametrize("count", [1, 8, 9, 63, 64, 65, 400])
@pytest.mark.parametrize("spread", [0, 60, 9000])
def test_bulk_decoders_match_the_record_loop(size, count, spread):
    """The uniform (regex) and fast paths give exactly what the general loop gives."""
    rng = random.Random(size * 1000 + count + spread)
    value = rng.randbytes(size)
    data = build_batch([(None, value, (), T0 + rng.randrange(spread + 1)) for _ in range(count)])
    batch = decode_batch(data)
    h = batch.header
    payload, start, end = batch._payload()
    want = decode_records_one_by_one(payload, start, end, count, _MyRecord, 7, h.base_timestamp, None)
    assert decode_records(payload, start, end, count, _MyRecord, 7, h.base_timestamp) == want
    for decoder in (_decode_uniform, _decode_fast):
        got = decoder(payload, start, end, count, _MyRecord, 7, h.base_timestamp, None)
        assert got is None or got == want
    assert batch.records(_MyRecord) == [_MyRecord((o + h.base_offset - 7, *rest)) for o, *rest in want]
    assert all(type(x) is _MyRecord for x in batch.records(_MyRecord))
    # one corrupt byte: a bulk path either declines or agrees with the general loop
    for _ in range(30):
        bad = bytearray(payload)
        i = rng.randrange(start, end)
        bad[i] = rng.randrange(256)
        bad = bytes(bad)
        try:
            slow = decode_records_one_by_one(bad, start, end, count, _MyRecord, 7, h.base_timestamp, None)
        except errors.InvalidRecordError:
            slow = None
        for decoder in (_decode_uniform, _decode_fast):
            got = decoder(bad, start, end, count, _MyRecord, 7, h.base_timestamp, None)
            assert got is None or got == slow


def test_bulk_decoders_decline_mixed_batches():
    """Keys, headers, mixed value sizes and gaps in offsets fall back and still decode right."""
    recs = [
        (b"k", b"v" * 10, (), T0),
        (None, b"v" * 11, (("h", b"x"),), T0 + 1),
        (None, None, (), T0 + 2),
        (b"", b"", (), T0 + 3),
    ] * 5
    data = build_batch(recs)
    batch = decode_batch(data)
    payload, start, end = batch._payload()
    assert _decode_uniform(payload, start, end, len(recs), DecodedRecord, 0, T0, None) is None
    got = batch.records()
    assert [(x.key, x.value, tuple(x.headers)) for x in got] == [(k, v, h) for k, v, h, _ in recs]
    assert [x.offset for x in got] == list(range(len(recs)))
    gap = encode_batch([Record(i * 2, i, None, b"x" * 5) for i in range(20)], base_offset=100)
    gb = decode_batch(gap)
    assert [x.offset for x in gb.records()] == [100 + 2 * i for i in range(20)]


def test_bulk_decoder_log_append_time():
    data = build_batch([(None, b"x" * 50, (), T0 + i) for i in range(100)], timestamp_type=b.LOG_APPEND_TIME)
    batch = decode_batch(data)
    got = batch.records()
    assert [x.timestamp for x in got] == [batch.max_timestamp] * 100
    assert [x.offset for x in got] == list(range(100))
