"""Zigzag varints of the record format, checked against known bytes and kafka-python."""

from __future__ import annotations

import random

import pytest
from kafka.record import util as kp_util

from odradek.protocol.varint import (
    VarintError,
    decode_unsigned_varint,
    decode_varint,
    decode_varlong,
    encode_raw,
    encode_unsigned_varint,
    encode_varint,
    encode_varlong,
    size_of_unsigned_varint,
    size_of_varint,
    size_of_varlong,
    skip_tagged_fields,
    zigzag_decode,
    zigzag_encode,
)

KNOWN = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (300, "d804"),
    (-8193, "818001"),
    (2**31 - 1, "feffffff0f"),
    (-(2**31), "ffffffff0f"),
]


@pytest.mark.parametrize(("value", "hexbytes"), KNOWN)
def test_known_encodings(value, hexbytes):
    assert encode_varint(value).hex() == hexbytes
    assert encode_varlong(value).hex() == hexbytes
    assert decode_varint(bytes.fromhex(hexbytes)) == (value, len(hexbytes) // 2)
    assert decode_varlong(bytes.fromhex(hexbytes)) == (value, len(hexbytes) // 2)
    assert size_of_varint(value) == len(hexbytes) // 2


def test_varlong_extremes():
    for value in (2**63 - 1, -(2**63), 2**40, -(2**40) - 7):
        encoded = encode_varlong(value)
        assert len(encoded) == size_of_varlong(value)
        assert decode_varlong(encoded) == (value, len(encoded))
    assert len(encode_varlong(-(2**63))) == 10


def test_random_round_trips_match_kafka_python():
    rng = random.Random(7)
    values = [rng.randint(-(2**31), 2**31 - 1) for _ in range(2000)]
    values += [rng.randint(-300, 300) for _ in range(500)]
    for value in values:
        ours = encode_varint(value)
        theirs = bytearray()
        kp_util.encode_varint(value, theirs.append)
        assert ours == bytes(theirs)
        assert kp_util.decode_varint(ours, 0) == (value, len(ours))
        assert decode_varint(b"\xff" + ours + b"\xff", 1) == (value, len(ours) + 1)


def test_unsigned_varints():
    for value in (0, 1, 127, 128, 16383, 16384, 2**32 - 1):
        encoded = encode_unsigned_varint(value)
        assert len(encoded) == size_of_unsigned_varint(value)
        assert decode_unsigned_varint(encoded) == (value, len(encoded))
    assert encode_unsigned_varint(128) == b"\x80\x01"
    with pytest.raises(VarintError):
        encode_unsigned_varint(-1)
    with pytest.raises(VarintError):
        encode_unsigned_varint(2**32)


def test_zigzag():
    for value in (0, -1, 1, -(2**63), 2**63 - 1):
        assert zigzag_decode(zigzag_encode(value)) == value
    assert [zigzag_encode(v) for v in (0, -1, 1, -2)] == [0, 1, 2, 3]


def test_too_long_and_truncated():
    with pytest.raises(VarintError):
        decode_varint(b"\x80\x80\x80\x80\x80\x01")  # 6 bytes
    with pytest.raises(VarintError):
        decode_varlong(b"\x80" * 10 + b"\x01")  # 11 bytes
    with pytest.raises(VarintError):
        decode_varint(b"\x80\x80")
    with pytest.raises(VarintError):
        decode_varint(b"")
    with pytest.raises(VarintError):
        decode_unsigned_varint(b"\xff\xff\xff\xff\xff\x01")


def test_out_of_range_encodes():
    with pytest.raises(VarintError):
        encode_varint(2**31)
    with pytest.raises(VarintError):
        encode_varlong(2**63)


def test_skip_tagged_fields():
    # none; two fields (tag 0 with 2 bytes, tag 300 with 0 bytes); then a marker byte after
    assert skip_tagged_fields(b"\x00\xff", 0) == 1
    section = encode_unsigned_varint(2) + b"\x00\x02hi" + encode_unsigned_varint(300) + b"\x00"
    assert skip_tagged_fields(section + b"\xff", 0) == len(section)
    for cut in range(1, len(section)):
        with pytest.raises((VarintError, IndexError)):
            skip_tagged_fields(section[:cut], 0)


def test_encode_raw_beyond_int32():
    z = (1 << 63) - 1
    assert decode_varlong(encode_raw(z << 1)) == (z, 10)
