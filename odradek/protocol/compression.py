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

Decompression is bounded. A batch is small on the wire, but what it expands to is up to
its sender: 10 KB of zstd can hold 300 MB of zeros. ``iter_decompressed`` yields the output
in pieces of at most ``CHUNK_BYTES`` (gzip through ``zlib`` with ``max_length``, zstd
through ``zstandard``'s streaming reader, lz4 block by block, snappy xerial block by block;
a raw snappy block declares its length up front), so a reader that needs only part of each
record (keys, timestamps) never holds the whole output; ``decompress`` joins the pieces
for readers that need everything. Both stop with ``DecompressedTooLargeError`` (Kafka's
MESSAGE_TOO_LARGE) as soon as the output passes ``max_size``, before decompressing
further; the default, ``MAX_DECOMPRESSED_BYTES``, is what the broker allows a batch of a
topic with the default ``max.message.bytes`` (see storage.log_validator for the rule).

Failures to decompress raise ``CorruptMessageError``; a codec id outside 0..4 (or zstd
in a legacy message set) raises ``UnsupportedCompressionTypeError``. Pure functions over
bytes; thread-safe.
"""

from __future__ import annotations

import functools
import struct
import threading
import zlib
from collections.abc import Iterator

import cramjam
import zstandard

from odradek.protocol import errors

__all__ = [
    "CHUNK_BYTES",
    "CODEC_NAMES",
    "GZIP",
    "MAX_DECOMPRESSED_BYTES",
    "MAX_LEGACY_DECOMPRESSED_BYTES",
    "LZ4",
    "NONE",
    "SNAPPY",
    "ZSTD",
    "DecompressedTooLargeError",
    "codec_for_name",
    "compress",
    "decompress",
    "iter_decompressed",
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
_LZ4_BLOCK_SIZES = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}  # BD byte bits 4-6
_UINT32_LE = struct.Struct("<I")

# Largest output of one decompressed payload unless the caller says otherwise (see above).
MAX_DECOMPRESSED_BYTES = (1 << 31) - 1
MAX_LEGACY_DECOMPRESSED_BYTES = 64 << 20
# Output a streaming reader holds at once (at most this plus one codec block).
CHUNK_BYTES = 1 << 20


_buffers = threading.local()  # per-thread codec state: an lz4 block buffer, a zstd context


class DecompressedTooLargeError(errors.MessageTooLargeError):
    """A batch expands to more than the reader allows: refused before it is all decompressed."""


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


def decompress(codec: int, data, *, magic: int = 2, max_size: int | None = None) -> bytes:
    """Decompress a batch payload, refusing (``DecompressedTooLargeError``) output over
    ``max_size`` bytes (default: see the module docstring). ``magic`` selects legacy quirks
    (LZ4 checksum of magic 0) and the default limit."""
    if codec == NONE:
        return bytes(data)
    if max_size is None:
        max_size = MAX_DECOMPRESSED_BYTES if magic >= 2 else MAX_LEGACY_DECOMPRESSED_BYTES
    out = []
    total = 0
    try:
        for piece in _pieces(codec, data, magic, max_size):
            total += len(piece)
            if total > max_size:
                raise _too_large(codec, data, max_size)
            out.append(piece)
    except _CODEC_ERRORS as exc:
        raise _corrupt(codec, exc) from None
    return out[0] if len(out) == 1 else b"".join(out)


def iter_decompressed(codec: int, data, *, magic: int = 2, max_size: int | None = None) -> Iterator[bytes]:
    """The decompressed payload in pieces of at most ``CHUNK_BYTES``, in order.

    Raises ``DecompressedTooLargeError`` before yielding past ``max_size`` bytes in total,
    ``CorruptMessageError`` when the payload does not decode (possibly after some pieces).
    """
    if max_size is None:
        max_size = MAX_DECOMPRESSED_BYTES if magic >= 2 else MAX_LEGACY_DECOMPRESSED_BYTES
    if codec == NONE:
        if len(data) > max_size:
            raise _too_large(codec, data, max_size)
        yield bytes(data)
        return
    total = 0
    try:
        for piece in _pieces(codec, data, magic, max_size):
            total += len(piece)
            if total > max_size:
                raise _too_large(codec, data, max_size)
            yield piece
    except _CODEC_ERRORS as exc:
        raise _corrupt(codec, exc) from None


_CODEC_ERRORS = (cramjam.DecompressionError, zlib.error, zstandard.ZstdError)


def _pieces(codec: int, data, magic: int, max_size: int) -> Iterator[bytes]:
    if codec == GZIP:
        return _gzip_pieces(data)
    if codec == SNAPPY:
        return _snappy_pieces(data, max_size)
    if codec == LZ4:
        return _lz4_pieces(data, magic)
    if codec == ZSTD:
        if magic < 2:
            raise errors.UnsupportedCompressionTypeError("zstd needs message format v2")
        return _zstd_pieces(data, max_size)
    raise _unsupported(codec)


def _corrupt(codec: int, exc: Exception) -> errors.CorruptMessageError:
    return errors.CorruptMessageError(f"{CODEC_NAMES[codec]} decompression failed: {exc}")


def _too_large(codec: int, data, max_size: int) -> DecompressedTooLargeError:
    return DecompressedTooLargeError(
        f"a {CODEC_NAMES[codec]} batch payload of {len(data)} bytes decompresses to more than "
        f"{max_size} bytes, the most the broker decompresses for one batch"
    )


# -- gzip -----------------------------------------------------------------------------


def _gzip_pieces(data) -> Iterator[bytes]:
    """gzip members (java.util.zip writes one; concatenated ones are read as one stream)."""
    pending = bytes(data)
    if not pending:
        raise errors.CorruptMessageError("empty gzip payload")
    while pending:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while not inflater.eof:
            piece = inflater.decompress(pending, CHUNK_BYTES)
            pending = inflater.unconsumed_tail
            if piece:
                yield piece
            elif not pending and not inflater.eof:
                raise errors.CorruptMessageError("gzip payload ends inside its stream")
        pending = inflater.unused_data


# -- zstd -----------------------------------------------------------------------------

_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 << 10
_ZSTD_FCS_BYTES = (0, 2, 4, 8)
_ZSTD_DICT_ID_BYTES = (0, 1, 2, 4)


def _zstd_output_bound(view: memoryview, max_size: int) -> tuple[int, int]:
    """``(bound, frames)``: the most the zstd frames in ``view`` can expand to and how many
    frames (skippable ones included) there are, read from their block headers
    (RFC 8878): raw and RLE blocks state their size, a compressed block yields at most 128 KiB.
    CorruptMessageError unless the frames fill ``view`` exactly (so a frame cut short is
    noticed, which the streaming reader would not), DecompressedTooLargeError as soon as the
    sizes the blocks state pass ``max_size``."""
    end = len(view)
    pos = 0
    stated = 0
    bound = 0
    frames = 0
    if end < 4:
        raise errors.CorruptMessageError("not a zstd frame")
    while pos < end:
        frames += 1
        if pos + 4 > end:
            raise errors.CorruptMessageError("zstd payload ends inside a frame's magic number")
        (magic,) = _UINT32_LE.unpack_from(view, pos)
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # a skippable frame
            if pos + 8 > end:
                raise errors.CorruptMessageError("truncated skippable zstd frame")
            pos += 8 + _UINT32_LE.unpack_from(view, pos + 4)[0]
            continue
        if magic != _ZSTD_MAGIC:
            raise errors.CorruptMessageError("not a zstd frame")
        if pos + 5 > end:
            raise errors.CorruptMessageError("truncated zstd frame header")
        fhd = view[pos + 4]
        single_segment = fhd & 0x20
        fcs = _ZSTD_FCS_BYTES[fhd >> 6] or (1 if single_segment else 0)
        pos += 5 + (0 if single_segment else 1) + _ZSTD_DICT_ID_BYTES[fhd & 0x03] + fcs
        while True:
            if pos + 3 > end:
                raise errors.CorruptMessageError("zstd frame ends before its last block")
            header = view[pos] | view[pos + 1] << 8 | view[pos + 2] << 16
            kind = (header >> 1) & 0x03
            size = header >> 3
            pos += 3
            if kind == 1:  # RLE: one byte, repeated size times
                pos += 1
                stated += size
                bound += size
            elif kind == 3:
                raise errors.CorruptMessageError("zstd block of the reserved type")
            else:
                pos += size
                if kind == 0:
                    stated += size
                    bound += size
                else:
                    bound += _ZSTD_BLOCK_MAX
            if stated > max_size:
                raise _too_large(ZSTD, view, max_size)
            if header & 1:
                break
        pos += 4 if fhd & 0x04 else 0  # content checksum
        if pos > end:
            raise errors.CorruptMessageError("zstd frame runs past the payload")
    return bound, frames


def _zstd() -> zstandard.ZstdDecompressor:
    """This thread's decompressor (one may not be used by two threads at once; reusing its
    context makes a small batch ten times cheaper than a fresh one)."""
    zstd = getattr(_buffers, "zstd", None)
    if zstd is None:
        zstd = _buffers.zstd = zstandard.ZstdDecompressor()
    return zstd


def _zstd_pieces(data, max_size: int) -> Iterator[bytes]:
    """zstd frames (one in practice), at once when their block headers show they fit in one
    piece, else CHUNK_BYTES at a time."""
    view = memoryview(data)
    bound, frames = _zstd_output_bound(view, max_size)
    if bound <= CHUNK_BYTES and frames == 1:
        # The one-shot call allocates what the frame header declares, whatever max_output_size
        # says: a forged header declaring exabytes must be refused before it.
        declared = zstandard.frame_content_size(view)
        if declared > bound:
            raise errors.CorruptMessageError(
                f"zstd frame declares {declared} bytes but its blocks hold at most {bound}"
            )
        yield _zstd().decompress(view, max_output_size=bound)
        return
    with _zstd().stream_reader(view, read_size=len(view), read_across_frames=True) as reader:
        while piece := reader.read(CHUNK_BYTES):
            yield piece


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


def _snappy_raw_block(block, max_size: int) -> bytes:
    declared = cramjam.snappy.decompress_raw_len(block)
    if declared > _SNAPPY_MAX_RATIO * len(block) + 64:
        raise errors.CorruptMessageError(
            f"snappy block of {len(block)} bytes claims {declared} uncompressed bytes"
        )
    if declared > max_size:
        raise _too_large(SNAPPY, block, max_size)
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_pieces(data, max_size: int) -> Iterator[bytes]:
    view = memoryview(data)
    if view[:8] != XERIAL_MAGIC:
        yield _snappy_raw_block(view, max_size)  # librdkafka: one raw block, length declared
        return
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
        yield _snappy_raw_block(view[pos : pos + length], max_size)
        pos += length


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


@functools.lru_cache(maxsize=64)
def _lz4_header_checksum(descriptor: bytes) -> int:
    """The header checksum byte of an LZ4 frame descriptor (a handful of distinct ones in
    practice: Kafka's writers always send the same flags and block size)."""
    return (xxh32_short(descriptor) >> 8) & 0xFF


def _lz4_buffer(size: int) -> bytearray:
    """A block-sized output buffer, reused by this thread's later frames (zeroing a new
    64 KiB for every small batch would cost more than decompressing it)."""
    buf = getattr(_buffers, "lz4", None)
    if buf is None or len(buf) < size:
        buf = _buffers.lz4 = bytearray(size)
    return buf


def _lz4_pieces(data, magic: int) -> Iterator[bytes]:
    """The blocks of LZ4 frames, each decompressed on its own (Kafka's blocks are independent).

    The header checksum is checked except for magic 0 (Kafka < 0.10 computed it wrongly, and
    Kafka ignores it there). Block and content checksums (xxhash32) are skipped, not
    checked: the batch's CRC already covers these bytes.
    """
    view = memoryview(data)
    end = len(view)
    pos = 0
    if end < 7:
        raise errors.CorruptMessageError("not an LZ4 frame")
    while pos < end:
        if bytes(view[pos : pos + 4]) != _LZ4_MAGIC or pos + 7 > end:
            raise errors.CorruptMessageError("not an LZ4 frame")
        flg = view[pos + 4]
        if flg >> 6 != 1:
            raise errors.CorruptMessageError(f"unsupported LZ4 frame version {flg >> 6}")
        if not flg & 0x20:
            raise errors.CorruptMessageError("LZ4 frame with dependent blocks (Kafka needs independent blocks)")
        if flg & 0x01:
            raise errors.CorruptMessageError("LZ4 frame with a dictionary id (Kafka writes none)")
        block_max = _LZ4_BLOCK_SIZES.get((view[pos + 5] >> 4) & 0x07)
        if block_max is None:
            raise errors.CorruptMessageError(f"LZ4 frame with an invalid block size byte {view[pos + 5]}")
        hc_pos = pos + 6 + (8 if flg & 0x08 else 0)
        if hc_pos >= end:
            raise errors.CorruptMessageError("truncated LZ4 frame descriptor")
        if magic > 0 and view[hc_pos] != _lz4_header_checksum(bytes(view[pos + 4 : hc_pos])):
            raise errors.CorruptMessageError("LZ4 frame descriptor fails its header checksum")
        pos = hc_pos + 1
        block_checksum = 4 if flg & 0x10 else 0
        out = _lz4_buffer(block_max)
        while True:
            if pos + 4 > end:
                raise errors.CorruptMessageError("LZ4 frame ends without its end mark")
            (size,) = _UINT32_LE.unpack_from(view, pos)
            pos += 4
            if size == 0:
                break
            stored = size & 0x80000000
            size &= 0x7FFFFFFF
            if size > block_max or pos + size + block_checksum > end:
                raise errors.CorruptMessageError("LZ4 block runs past the frame or its block size")
            block = view[pos : pos + size]
            if stored:
                yield bytes(block)
            else:
                n = cramjam.lz4.decompress_block_into(block, out)
                yield bytes(memoryview(out)[:n])
            pos += size + block_checksum
        pos += 4 if flg & 0x04 else 0  # content checksum
        if pos > end:
            raise errors.CorruptMessageError("LZ4 frame ends inside its content checksum")
