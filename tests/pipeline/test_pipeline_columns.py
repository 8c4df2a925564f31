"""The vectorised record decoder against the reference codec in ``protocol.record_batch``:
same offsets, timestamps, keys, values and headers for every shape of batch."""

from __future__ import annotations

import random

import pytest

from odradek.pipeline.columns import AbortedFilter, decode_response  # noqa: E402
from odradek.protocol import compression as codecs  # noqa: E402
from odradek.protocol import errors  # noqa: E402
from odradek.protocol.batch import LOG_APPEND_TIME  # noqa: E402
from odradek.protocol.batch_builder import build_batch  # noqa: E402
from odradek.protocol.control_records import ABORT, build_control_batch  # noqa: E402
from odradek.protocol.record_batch import iter_records  # noqa: E402


def _records(n: int, *, seed: int = 1, big: bool = False, headers: bool = False) -> list:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        key = None if rng.random() < 0.2 else f"k{i}".encode() * rng.randint(1, 5)
        size = rng.choice([0, 1, 11, 12, 13, 60, 64, 127, 128, 300] + ([9000, 20000] if big else []))
        value = None if rng.random() < 0.1 else bytes(rng.randrange(256) for _ in range(size))
        hs = ()
        if headers and rng.random() < 0.5:
            hs = (("h1", b"x"), ("h2", None), ("h3", b"y" * rng.randint(0, 200)))
        ts = 1_700_000_000_000 + i * rng.choice([0, 1, 70, 100_000, 10**9])
        out.append((key, value, hs, ts))
    return out


def _fetch_payload(batches_of: list[list], *, base: int = 0, **kw) -> bytes:
    parts = []
    offset = base
    for recs in batches_of:
        parts.append(build_batch(recs, base_offset=offset, **kw))
        offset += len(recs)
    return b"".join(parts)


def _expect(payload: bytes, start: int, end: int):
    return [r for r in iter_records(payload) if start <= r.offset < end]


def _check(payload: bytes, start: int = 0, end: int = 1 << 62, *, headers: bool = True):
    got = decode_response(payload, start=start, end=end, include_headers=headers)
    want = _expect(payload, start, end)
    assert got.offsets.tolist() == [r.offset for r in want]
    assert got.timestamps.tolist() == [r.timestamp for r in want]
    assert got.keys.to_pylist() == [r.key for r in want]
    assert got.values.to_pylist() == [r.value for r in want]
    if headers:
        assert [tuple(h) for h in got.headers] == [tuple(r.headers) for r in want]
    return got


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_decodes_like_the_reference_codec(codec):
    compression = codecs.codec_for_name(codec)
    recs = _records(500, headers=True)
    payload = _fetch_payload([recs[:7], recs[7:300], recs[300:]], base=42, compression=compression)
    got = _check(payload, 0)
    assert got.next_offset == 42 + 500
    assert set(got.timestamp_types.tolist()) == {0}


def test_large_records_take_the_wide_varint_path():
    payload = _fetch_payload([_records(80, big=True, seed=3)])
    _check(payload)


def test_offset_range_is_cut_at_both_ends():
    recs = _records(100, seed=5)
    payload = _fetch_payload([recs[:40], recs[40:]], base=1000)
    got = _check(payload, 1010, 1070)
    assert got.offsets[0] == 1010 and got.offsets[-1] == 1069


def test_log_append_time_batches_report_type_1():
    recs = _records(10, seed=7)
    payload = build_batch(recs, timestamp_type=LOG_APPEND_TIME, base_timestamp=recs[0][3])
    got = decode_response(payload, start=0, end=100, include_headers=False)
    want = list(iter_records(payload))
    assert got.timestamps.tolist() == [r.timestamp for r in want]
    assert set(got.timestamp_types.tolist()) == {1}


def test_trailing_partial_batch_is_left_for_the_next_fetch():
    payload = _fetch_payload([_records(10), _records(10, seed=2)])
    cut = payload[: len(payload) - 5]
    got = decode_response(cut, start=0, end=100, include_headers=False)
    assert got.offsets.tolist() == list(range(10))
    assert got.next_offset == 10


def test_empty_payload():
    got = decode_response(b"", start=5, end=10, include_headers=True)
    assert len(got) == 0 and got.next_offset == 5


def test_read_committed_drops_aborted_transactions_and_markers():
    class Aborted:
        def __init__(self, producer_id, first_offset):
            self.producer_id, self.first_offset = producer_id, first_offset

    committed = build_batch(
        [(b"a", b"1", (), 1)],
        base_offset=0,
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    aborted = build_batch(
        [(b"b", b"2", (), 1)],
        base_offset=1,
        producer_id=8,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    marker = build_control_batch(ABORT, base_offset=2, producer_id=8, producer_epoch=0, coordinator_epoch=0)
    plain = build_batch([(b"c", b"3", (), 1)], base_offset=3)
    payload = committed + aborted + marker + plain
    flt = AbortedFilter()
    flt.add([Aborted(8, 1)])
    got = decode_response(payload, start=0, end=10, include_headers=False, aborted=flt)
    assert got.offsets.tolist() == [0, 3]
    assert got.values.to_pylist() == [b"1", b"3"]
    assert got.next_offset == 4
    # read_uncommitted keeps the aborted record and still drops the marker
    got = decode_response(payload, start=0, end=10, include_headers=False)
    assert got.offsets.tolist() == [0, 1, 3]


def test_corrupt_record_lengths_are_errors():
    payload = bytearray(_fetch_payload([_records(20, seed=9)]))
    payload[61] ^= 0x7F  # the first record's length varint
    with pytest.raises((errors.InvalidRecordError, errors.CorruptMessageError)):
        decode_response(bytes(payload), start=0, end=100, include_headers=False)
