"""Batch compression codecs: round trips, the framings other clients write, and bad input."""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import pytest
from aiokafka import codec as aiokafka_codec

from odradek.protocol import compression as c
from odradek.protocol import errors

PAYLOADS = [b"", b"x", os.urandom(1000), b"abcdefgh" * 40_000]  # last one spans blocks


@pytest.mark.parametrize("codec", [c.NONE, c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD])
@pytest.mark.parametrize("payload", PAYLOADS, ids=["empty", "one", "random", "large"])
def test_round_trip(codec, payload):
    assert c.decompress(codec, c.compress(codec, payload)) == payload


def test_gzip_is_standard():
    data = b"hello gzip " * 100
    assert gzip.decompress(c.compress(c.GZIP, data)) == data
    assert c.decompress(c.GZIP, gzip.compress(data)) == data


def test_snappy_writes_xerial_blocks_of_32k():
    data = bytes(range(256)) * 300  # 76,800 bytes: three blocks
    framed = c.compress(c.SNAPPY, data)
    assert framed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, 0
    while pos < len(framed):
        (length,) = struct.unpack_from(">i", framed, pos)
        pos += 4 + length
        blocks += 1
    assert blocks == 3
    assert aiokafka_codec.snappy_decode(framed) == data


def test_snappy_reads_raw_and_xerial_from_other_clients():
    data = b"librdkafka writes raw snappy " * 50
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert c.decompress(c.SNAPPY, raw) == data
    assert c.decompress(c.SNAPPY, aiokafka_codec.snappy_encode(data, xerial_compatible=False)) == data
    assert c.decompress(c.SNAPPY, aiokafka_codec.snappy_encode(data, xerial_blocksize=100)) == data


def test_snappy_concatenated_xerial_streams():
    assert c.decompress(c.SNAPPY, c.compress(c.SNAPPY, b"one") + c.compress(c.SNAPPY, b"two")) == b"onetwo"


def test_snappy_rejects_truncation_and_bombs():
    framed = c.compress(c.SNAPPY, b"data" * 100)
    with pytest.raises(errors.CorruptMessageError):
        c.decompress(c.SNAPPY, framed[:-3])
    # A raw block that claims 4 GB from a handful of bytes.
    with pytest.raises(errors.CorruptMessageError):
        c.decompress(c.SNAPPY, b"\xfe\xff\xff\xff\x0f\x00\x01\x02")


def _lz4_flags(frame: bytes) -> int:
    assert frame[:4] == b"\x04\x22\x4d\x18"
    return frame[4]


def test_lz4_frame_is_what_kafka_reads():
    frame = c.compress(c.LZ4, b"lz4 " * 50_000)
    flg = _lz4_flags(frame)
    assert flg >> 6 == 1  # version
    assert flg & 0x20  # independent blocks
    assert not flg & 0x04  # no content checksum
    assert not flg & 0x08  # no content size
    assert aiokafka_codec.lz4_decode(frame) == b"lz4 " * 50_000
    assert c.decompress(c.LZ4, aiokafka_codec.lz4_encode(b"from aiokafka")) == b"from aiokafka"


def test_lz4_dependent_blocks_rejected():
    compressor = cramjam.lz4.Compressor(block_linked=True)
    compressor.compress(b"linked " * 1000)
    frame = bytes(compressor.finish())
    assert not _lz4_flags(frame) & 0x20
    with pytest.raises(errors.CorruptMessageError):
        c.decompress(c.LZ4, frame)


def test_lz4_broken_header_checksum_of_magic_0():
    data = b"kafka 0.8 lz4 " * 20
    frame = bytearray(c.compress(c.LZ4, data))
    # Kafka < 0.10 hashed the magic number too.
    frame[6] = (c.xxh32_short(bytes(frame[0:6])) >> 8) & 0xFF
    assert c.decompress(c.LZ4, bytes(frame), magic=0) == data
    with pytest.raises(errors.CorruptMessageError):
        c.decompress(c.LZ4, bytes(frame), magic=1)


def test_xxh32_known_values():
    assert c.xxh32_short(b"") == 0x02CC5D05
    assert c.xxh32_short(b"a") == 0x550D7456
    assert c.xxh32_short(b"abc") == 0x32D153FF
    # Descriptor with a content size (10 bytes, exercises the 4-byte lanes): the lz4
    # library's own header checksum must match ours.
    descriptor = bytes([0x68, 0x40]) + struct.pack("<Q", 100_000)
    assert c.xxh32_short(descriptor) >> 8 & 0xFF == 0xB6


def test_zstd_frame_without_content_size():
    compressor = cramjam.zstd.Compressor(level=3)
    compressor.compress(b"streamed " * 1000)
    frame = bytes(compressor.finish())
    assert not frame[4] & 0xC0  # frame header: no content size field
    assert c.decompress(c.ZSTD, frame) == b"streamed " * 1000


def test_zstd_not_in_legacy_message_sets():
    with pytest.raises(errors.UnsupportedCompressionTypeError):
        c.decompress(c.ZSTD, c.compress(c.ZSTD, b"x"), magic=1)


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec(codec):
    with pytest.raises(errors.UnsupportedCompressionTypeError):
        c.compress(codec, b"x")
    with pytest.raises(errors.UnsupportedCompressionTypeError):
        c.decompress(codec, b"x")


@pytest.mark.parametrize("codec", [c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD])
def test_garbage_is_corrupt(codec):
    with pytest.raises(errors.CorruptMessageError):
        c.decompress(codec, b"\x82SNAPPY\x00 this is not compressed at all \x00\xff")
    with pytest.raises(errors.CorruptMessageError):
        c.decompress(codec, b"garbage garbage garbage")


def test_codec_names():
    assert [c.codec_for_name(n) for n in ("none", "GZIP", "snappy", "lz4", "zstd", "uncompressed")] == [
        0,
        1,
        2,
        3,
        4,
        0,
    ]
    with pytest.raises(ValueError):
        c.codec_for_name("brotli")


@pytest.mark.parametrize(
    ("codec", "levels"), [(c.GZIP, [None, -1, 1, 9]), (c.LZ4, [None, 1, 17]), (c.ZSTD, [None, -5, 1, 22])]
)
def test_compression_levels(codec, levels):
    data = b"levels " * 500
    for level in levels:
        assert c.decompress(codec, c.compress(codec, data, level)) == data
