"""Decoding a batch's records in bulk: the consumer's hot path, with the reference as fallback.

:func:`decode_records` turns a (decompressed) records section into a list of tuples of a
class the caller picks (``DecodedRecord``, or a client's own record class). It tries, in
order:

1. ``_decode_uniform``: null keys, no headers, values all of one length (a producer's
   typical batch) — one regular expression matches every record in C;
2. ``_decode_fast``: consecutive offset deltas and no headers — one Python loop that only
   collects timestamps, keys and values, the tuples built at the end by ``map``/``zip``;
3. ``records.decode_records_one_by_one``: anything else, checking each record and naming
   what is wrong (compacted batches, headers, corrupt bytes).

The first two return None whenever their shape does not apply, so every batch decodes
exactly as the reference decoder would; ``tests/protocol`` compares them.
"""

from __future__ import annotations

import re
from itertools import repeat

from odradek.protocol.records import MIN_RECORD_SIZE, decode_records_one_by_one

_new_tuple = tuple.__new__


def _varint_bytes(z):
    """The unsigned varint of ``z`` < 2**14 (one or two bytes)."""
    return bytes([z]) if z < 0x80 else bytes([(z & 0x7F) | 0x80, z >> 7])


_VARINT_1_OR_2 = rb"(?:[\x00-\x7f]|[\x80-\xff][\x00-\x7f])"
_VARINT_VALUES: dict | None = None  # every 1- and 2-byte varint -> its zigzag value (built lazily)
_OFFSET_DELTA_VARINTS: tuple = ()  # the varint of offset delta i, for i < 8192
_UNIFORM_PATTERNS: dict = {}  # (value-length varint, value length) -> compiled pattern or False


def _uniform_tables():
    global _VARINT_VALUES, _OFFSET_DELTA_VARINTS
    t = {bytes([b]): (b >> 1) ^ -(b & 1) for b in range(0x80)}
    for b0 in range(0x80, 0x100):
        for b1 in range(0x80):
            z = (b0 & 0x7F) | (b1 << 7)
            t[bytes([b0, b1])] = (z >> 1) ^ -(z & 1)
    _OFFSET_DELTA_VARINTS = tuple(_varint_bytes(2 * i) for i in range(8192))
    _VARINT_VALUES = t
    return t


def _uniform_pattern(vl: bytes, n: int):
    key = (vl, n)
    pat = _UNIFORM_PATTERNS.get(key)
    if pat is None:
        k = 3 + len(vl) + n  # attributes, null key, value length, value, header count
        lens = [_varint_bytes(2 * (k + w)) for w in (2, 3, 4)]  # + timestamp and offset widths
        if k + 4 >= 8192 or len({len(e) for e in lens}) != 1:
            pat = False
        else:
            e2, e3, e4 = (re.escape(e) for e in lens)
            v1 = rb"[\x00-\x7f]"
            v2 = rb"[\x80-\xff][\x00-\x7f]"
            # the length field must fit the widths of the timestamp and offset varints
            fits = b"|".join(
                (
                    e2 + rb"\x00" + v1 + v1,
                    e3 + rb"\x00(?:" + v1 + v2 + b"|" + v2 + v1 + b")",
                    e4 + rb"\x00" + v2 + v2,
                )
            )
            record = rb".{%d}\x00(%s)(%s)\x01%s(.{%d})\x00" % (
                len(lens[0]),
                _VARINT_1_OR_2,
                _VARINT_1_OR_2,
                re.escape(vl),
                n,
            )
            pat = re.compile(rb"(?=(?:" + fits + rb")\x01)" + record, re.S)
        if len(_UNIFORM_PATTERNS) >= 256:
            _UNIFORM_PATTERNS.clear()
        _UNIFORM_PATTERNS[key] = pat
    return pat


def _value_length_at(data, p):
    """(value-length varint bytes, position after the record) of the null-key record at p, or None."""
    b = data[p]
    if b < 0x80:
        ln = (b >> 1) ^ -(b & 1)
        p += 1
    else:
        z = (b & 0x7F) | (data[p + 1] << 7)
        ln = (z >> 1) ^ -(z & 1)
        p += 2
    rend = p + ln
    p += 1
    p += 1 if data[p] < 0x80 else 2
    p += 1 if data[p] < 0x80 else 2
    if data[p] != 1:
        return None
    p += 1
    vl = data[p : p + 1] if data[p] < 0x80 else data[p : p + 2]
    return vl, rend


def _decode_uniform(data, pos, end, count, cls, offset_base, timestamp_base, fixed_timestamp):
    """Batches of null-key, header-less records whose values all have one length, in C.

    The common shape of a producer's batch. One regular expression per value length
    matches a whole record, checking its length field against the timestamp and offset
    varint widths in a lookahead; ``findall`` then returns every record's timestamp and
    offset varints and its value in one call. Offsets must be consecutive and the matches
    must tile the payload exactly; anything else returns None (see :func:`_decode_fast`).
    """
    if count < 8 or count > 8192:
        return None
    try:
        first = _value_length_at(data, pos)
        if first is None:
            return None
        second = _value_length_at(data, first[1])
        if second is None or second[0] != first[0]:
            return None
    except IndexError:
        return None
    vl = first[0]
    table = _VARINT_VALUES or _uniform_tables()
    n = table.get(vl, -1)
    if n < 0:
        return None
    pat = _uniform_pattern(vl, n)
    if not pat:
        return None
    found = pat.findall(data, pos, end)
    if len(found) != count:
        return None
    stamps, deltas, values = zip(*found, strict=True)
    if deltas != _OFFSET_DELTA_VARINTS[:count]:
        return None
    width = len(_varint_bytes(2 * (3 + len(vl) + n + 2)))
    if count * (width + 3 + len(vl) + n) + sum(map(len, stamps)) + sum(map(len, deltas)) != end - pos:
        return None
    return list(
        map(
            _new_tuple,
            repeat(cls, count),
            zip(
                range(offset_base, offset_base + count),
                map(timestamp_base.__add__, map(table.__getitem__, stamps))
                if fixed_timestamp is None
                else repeat(fixed_timestamp, count),
                repeat(None, count),
                values,
                repeat((), count),
                strict=True,
            ),
        )
    )


# zigzag decodings of every one-byte varint (0..127)
_ZIGZAG_1 = [(z >> 1) ^ -(z & 1) for z in range(0x80)]


def _decode_fast(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    cls: type,
    offset_base: int,
    timestamp_base: int,
    fixed_timestamp: int | None,
) -> list | None:
    """The common case of ``decode_records_one_by_one``, in bulk: None when it does not apply.

    Handles records with consecutive offset deltas (0, 1, 2, ...) and no headers, the way
    producers write them; anything else (compacted batches, headers, odd varints) returns
    None and the caller decodes with ``decode_records_one_by_one``, which also reports errors.
    The loop only collects timestamps, keys and values; the record tuples are built at the
    end by ``map``/``zip`` in C instead of one Python-level constructor call per record.
    """
    if count <= 0 or count * MIN_RECORD_SIZE > end - pos:
        return None
    zz = _ZIGZAG_1
    values: list = []
    vappend = values.append
    stamps: list = []
    tappend = stamps.append
    keys: list | None = None
    try:
        for i in range(count):
            # length (1 or 2 bytes)
            b = data[pos]
            if b < 0x80:
                record_end = pos + 1 + zz[b]
                pos += 2  # and the attributes byte
            else:
                c = data[pos + 1]
                if c >= 0x80:
                    return None
                z = (b & 0x7F) | (c << 7)
                record_end = pos + 2 + ((z >> 1) ^ -(z & 1))
                pos += 3
            if record_end > end:
                return None
            # timestamp delta (1 or 2 bytes)
            b = data[pos]
            if b < 0x80:
                tappend(timestamp_base + zz[b])
                pos += 1
            else:
                c = data[pos + 1]
                if c >= 0x80:
                    return None
                z = (b & 0x7F) | (c << 7)
                tappend(timestamp_base + ((z >> 1) ^ -(z & 1)))
                pos += 2
            # offset delta: must be i
            b = data[pos]
            if b < 0x80:
                if zz[b] != i:
                    return None
                pos += 1
            else:
                c = data[pos + 1]
                if c >= 0x80:
                    return None
                z = (b & 0x7F) | (c << 7)
                if (z >> 1) ^ -(z & 1) != i:
                    return None
                pos += 2
            # key
            b = data[pos]
            if b == 1:  # null
                pos += 1
                if keys is not None:
                    keys.append(None)
            else:
                if b < 0x80:
                    n = zz[b]
                    pos += 1
                else:
                    c = data[pos + 1]
                    if c >= 0x80:
                        return None
                    z = (b & 0x7F) | (c << 7)
                    n = (z >> 1) ^ -(z & 1)
                    pos += 2
                if n < 0:
                    return None
                if keys is None:
                    keys = [None] * i
                keys.append(data[pos : pos + n])
                pos += n
            # value
            b = data[pos]
            if b < 0x80:
                n = zz[b]
                pos += 1
            else:
                c = data[pos + 1]
                if c >= 0x80:
                    return None
                z = (b & 0x7F) | (c << 7)
                n = (z >> 1) ^ -(z & 1)
                pos += 2
            if n < 0:
                if n != -1:
                    return None
                vappend(None)
            else:
                vappend(data[pos : pos + n])
                pos += n
            # no headers, and exactly the declared length
            if data[pos] or pos + 1 != record_end:
                return None
            pos = record_end
    except IndexError:
        return None
    if pos != end:
        return None
    return list(
        map(
            _new_tuple,
            repeat(cls, count),
            zip(
                range(offset_base, offset_base + count),
                stamps if fixed_timestamp is None else repeat(fixed_timestamp, count),
                repeat(None, count) if keys is None else keys,
                values,
                repeat((), count),
                strict=True,
            ),
        )
    )


def decode_records(
    data: bytes,
    pos: int,
    end: int,
    count: int,
    cls: type,
    offset_base: int,
    timestamp_base: int,
    fixed_timestamp: int | None = None,
) -> list:
    """``count`` records from ``data[pos:end]`` as ``cls`` tuples (a tuple subclass).

    Each is ``cls((offset_base + offsetDelta, timestamp, key, value, headers))`` built with
    ``tuple.__new__`` (``cls.__new__`` is not called), ``headers`` a tuple of ``(str,
    bytes | None)``; ``fixed_timestamp`` overrides every timestamp (LogAppendTime).
    InvalidRecordError when the records do not fill ``data[pos:end]`` exactly.
    """
    out = _decode_uniform(data, pos, end, count, cls, offset_base, timestamp_base, fixed_timestamp)
    if out is None:
        out = _decode_fast(data, pos, end, count, cls, offset_base, timestamp_base, fixed_timestamp)
    if out is None:
        out = decode_records_one_by_one(
            data, pos, end, count, cls, offset_base, timestamp_base, fixed_timestamp
        )
    return out
