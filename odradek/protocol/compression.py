"""Compression codecs of record batches, as Kafka's clients and brokers write them.

Codec ids are the low three bits of a batch's attributes: 0 none, 1 gzip, 2 snappy,
3 lz4, 4 zstd (zstd only in v2 batches). All of them go through ``cramjam``.

What each codec looks like on the wire, and what we accept:

* **gzip** — a standard gzip stream (RFC 1952), as ``java.util.zip.GZIPOutputStream``
  writes it. Default level 6 (Kafka's, KIP-390).
* **snappy** — two framings are in the wild. The Java client and broker write
  snappy-java's ``SnappyOutputStream`` format ("xerial"): the 16-byte header
  ``\\x82SNAPPY\\x00`` + int32 version 1 + int32 compatible-version 1, then blocks of
  ``int32 big-endian compressed length + raw snappy block``, each block holding up to
  32 KiB of input. librdkafka writes one raw snappy block without framing. Every reader
  takes both (snappy-java falls back to a raw block when the header is missing;
  librdkafka, kafka-python and aiokafka sniff the header), so we read both and write
  xerial, the reference implementation's format, which also bounds memory per block.
  A raw block whose declared length exceeds what snappy can expand to is rejected
  before allocating.
* **lz4** — the standard LZ4 frame format (KIP-57). Kafka's reader handles only
  independent blocks, so we write (and insist on) block independence, 64 KiB blocks,
  no content checksum, no content size. Magic 0 message sets from Kafka < 0.10 carry a
  wrong header checksum (the hash also covered the magic number); for magic 0 we
  repair it before decoding, as Kafka ignores it there. Default level 9.
* **zstd** — a standard zstd frame; frames without a content size (the Java client's
  streaming output) decode too. Default level 3.

Failures to decompress raise ``CorruptMessageError``; a codec id outside 0..4 (or zstd
in a legacy message set) raises ``UnsupportedCompressionTypeError``.
"""

from __future__ import annotations

import struct

import cramjam

from odradek.protocol import errors

__all__ = [
    "CODEC_NAMES",
    "GZIP",
    "LZ4",
    "NONE",
    "SNAPPY",
    "ZSTD",
    "codec_for_name",
    "compress",
    "decompress",
]

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
_BY_NAME = {name: codec for codec, name in CODEC_NAMES.items()}
_BY_NAME["uncompressed"] = NONE  # a topic's compression.type spells "none" this way

DEFAULT_LEVELS = {GZIP: 6, LZ4: 9, ZSTD: 3}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")
# A snappy element expands at most ~21x (a 3-byte copy yields 64 bytes); anything
# declaring more than this is corrupt, and we refuse to allocate for it.
_SNAPPY_MAX_RATIO = 24

_LZ4_MAGIC = b"\x04\x22\x4d\x18"


def codec_for_name(name: str) -> int:
    """Codec id of a compression.type value ("gzip", "lz4", …). ValueError for others."""
    try:
        return _BY_NAME[name.lower()]
    except KeyError:
        raise ValueError(f"unknown compression type {name!r}") from None


def _unsupported(codec: int) -> errors.KafkaError:
    return errors.UnsupportedCompressionTypeError(f"unknown compression codec id {codec}")


def compress(codec: int, data, level: int | None = None) -> bytes:
    """Compress ``data`` (bytes-like) the way Kafka's Java client does for ``codec``."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        # Kafka's gzip levels are 1..9, or -1 for the default (6).
        if level is None or level < 0:
            level = DEFAULT_LEVELS[GZIP]
        return bytes(cramjam.gzip.compress(data, level=level))
    if codec == SNAPPY:
        return _snappy_xerial_compress(data)
    if codec == LZ4:
        compressor = cramjam.lz4.Compressor(
            level=level or DEFAULT_LEVELS[LZ4], content_checksum=False, block_linked=False
        )
        compressor.compress(data)
        return bytes(compressor.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=DEFAULT_LEVELS[ZSTD] if level is None else level))
    raise _unsupported(codec)


def decompress(codec: int, data, *, magic: int = 2) -> bytes:
    """Decompress a batch payload. ``magic`` selects legacy quirks (LZ4 checksum of magic 0)."""
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            return _snappy_decompress(data)
        if codec == LZ4:
            return _lz4_decompress(data, magic)
        if codec == ZSTD:
            if magic < 2:
                raise errors.UnsupportedCompressionTypeError("zstd needs message format v2")
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        raise errors.CorruptMessageError(f"{CODEC_NAMES[codec]} decompression failed: {exc}") from None
    raise _unsupported(codec)


# -- snappy ---------------------------------------------------------------------------


def _snappy_xerial_compress(data) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    compress_raw = cramjam.snappy.compress_raw
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = compress_raw(view[start : start + _XERIAL_BLOCK])
        parts.append(_INT32.pack(len(block)))
        parts.append(bytes(block))
    return b"".join(parts)


def _snappy_raw_block(block) -> bytes:
    declared = cramjam.snappy.decompress_raw_len(block)
    if declared > _SNAPPY_MAX_RATIO * len(block) + 64:
        raise errors.CorruptMessageError(
            f"snappy block of {len(block)} bytes claims {declared} uncompressed bytes"
        )
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decompress(data) -> bytes:
    view = memoryview(data)
    if view[:8] != XERIAL_MAGIC:
        return _snappy_raw_block(view)
    out = []
    pos = 0
    end = len(view)
    while pos < end:
        if view[pos : pos + 8] == XERIAL_MAGIC:
            # A stream header; snappy-java also accepts concatenated streams.
            if pos + 16 > end:
                raise errors.CorruptMessageError("truncated xerial snappy header")
            pos += 16
            continue
        if pos + 4 > end:
            raise errors.CorruptMessageError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise errors.CorruptMessageError("xerial snappy block runs past the payload")
        out.append(_snappy_raw_block(view[pos : pos + length]))
        pos += length
    return b"".join(out)


# -- lz4 ------------------------------------------------------------------------------

_P1 = 2654435761
_P2 = 2246822519
_P3 = 3266489917
_P4 = 668265263
_P5 = 374761393
_M32 = 0xFFFFFFFF


def xxh32_short(data: bytes, seed: int = 0) -> int:
    """XXH32 of fewer than 16 bytes (an LZ4 frame descriptor); pure Python, no lanes."""
    if len(data) >= 16:
        raise ValueError("xxh32_short handles inputs shorter than 16 bytes only")
    h = (seed + _P5 + len(data)) & _M32
    pos = 0
    while pos + 4 <= len(data):
        h = (h + int.from_bytes(data[pos : pos + 4], "little") * _P3) & _M32
        h = (((h << 17) | (h >> 15)) & _M32) * _P4 & _M32
        pos += 4
    for b in data[pos:]:
        h = (h + b * _P5) & _M32
        h = (((h << 11) | (h >> 21)) & _M32) * _P1 & _M32
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def _lz4_descriptor_end(data) -> int:
    """Position of the header-checksum byte of an LZ4 frame, after checking Kafka's limits."""
    if len(data) < 7 or bytes(data[:4]) != _LZ4_MAGIC:
        raise errors.CorruptMessageError("not an LZ4 frame")
    flg = data[4]
    if flg >> 6 != 1:
        raise errors.CorruptMessageError(f"unsupported LZ4 frame version {flg >> 6}")
    if not flg & 0x20:
        raise errors.CorruptMessageError("LZ4 frame with dependent blocks (Kafka needs independent blocks)")
    return 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)


def _lz4_decompress(data, magic: int) -> bytes:
    hc_pos = _lz4_descriptor_end(data)
    if magic == 0 and hc_pos < len(data):
        fixed = bytearray(data)
        fixed[hc_pos] = (xxh32_short(bytes(fixed[4:hc_pos])) >> 8) & 0xFF
        data = fixed
    return bytes(cramjam.lz4.decompress(data))
