"""A produced batch that decompresses to far more than its size (a decompression bomb) does
not make the broker allocate what it expands to.

Found by the network fuzzer: a 9.7 KB zstd batch holding one record of 300 MB of zeros,
produced to a compacted topic, took the broker from 38 MB to 653 MB peak RSS while it looked
for null keys. Every place the broker decompresses a produced batch is bounded now: the key
check of a compacted topic streams the records (MESSAGE_TOO_LARGE past 64 x
max.message.bytes), recompression to the topic's codec and the conversion of legacy
compressed message sets stop at their limits. Each test runs a broker of its own, so its
peak RSS (VmHWM) is this test's.
"""

from __future__ import annotations

import struct
import zlib

import crc32c
import pytest
import zstandard
from broker_e2e import RawClient, create_topic, log_mentions, produce_body, record_batch
from test_legacy_produce import parse_produce_response, produce_request

MB = 1 << 20
PEAK_LIMIT_MB = 150  # the broker idles at ~40 MB; the bomb used to take it to 650 MB


def peak_rss_mb(broker) -> float:
    with open(f"/proc/{broker.proc.pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024


def _varint(v: int) -> bytes:
    v = (v << 1) ^ (v >> 63)
    out = bytearray()
    while v & ~0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def zstd_bomb(fill: bytes, value_size: int = 300 * MB, key: bytes = b"k") -> bytes:
    """A v2 batch of one record whose value is ``fill`` repeated to ``value_size`` bytes,
    zstd-compressed 1 MiB at a time (no content size in the frame, as the Java client writes
    it). Zeros become RLE blocks, which state their size; a repeated pattern becomes
    compressed blocks, which do not, so the broker finds out only by decompressing."""
    body_head = b"\x00" + _varint(0) + _varint(0) + _varint(len(key)) + key + _varint(value_size)
    compressor = zstandard.ZstdCompressor().compressobj()
    parts = [compressor.compress(_varint(len(body_head) + value_size + 1) + body_head)]
    chunk = fill * (MB // len(fill))
    parts += [compressor.compress(chunk) for _ in range(value_size // MB)]
    parts += [compressor.compress(_varint(0)), compressor.flush()]
    after_crc = struct.pack(">hiqqqhii", 4, 0, 1_700_000_000_000, 1_700_000_000_000, -1, -1, -1, 1)
    after_crc += b"".join(parts)
    return struct.pack(">qiibI", 0, 9 + len(after_crc), -1, 2, crc32c.crc32c(after_crc)) + after_crc


def gzip_legacy_bomb(value_size: int = 300 * MB) -> bytes:
    """A magic 1 message set: one gzip wrapper around one message of ``value_size`` zeros."""
    zeros = bytes(MB)
    inner_head = struct.pack(">bbq", 1, 0, 1_700_000_000_000) + struct.pack(">i", 1) + b"k"
    inner_head += struct.pack(">i", value_size)
    crc = zlib.crc32(inner_head)
    for _ in range(value_size // MB):
        crc = zlib.crc32(zeros, crc)
    gz = zlib.compressobj(6, zlib.DEFLATED, 31)
    parts = [gz.compress(struct.pack(">qiI", 0, 4 + len(inner_head) + value_size, crc) + inner_head)]
    parts += [gz.compress(zeros) for _ in range(value_size // MB)]
    parts.append(gz.flush())
    wrapped = b"".join(parts)
    after_crc = struct.pack(">bbq", 1, 1, 1_700_000_000_000) + struct.pack(">i", -1)
    after_crc += struct.pack(">i", len(wrapped)) + wrapped
    return struct.pack(">qiI", 0, 4 + len(after_crc), zlib.crc32(after_crc)) + after_crc


def _produce(broker, topic: str, batch: bytes):
    with RawClient(broker, timeout=60) as raw:
        response = raw.request(0, 9, produce_body(topic, 0, batch))
    (partition,) = response.responses[0].partition_responses
    return partition


@pytest.mark.parametrize("fill", [b"\x00", b"0123456789abcdef"], ids=["zeros", "pattern"])
@pytest.mark.parametrize(
    "config",
    [{"cleanup.policy": "compact"}, {"compression.type": "gzip"}],
    ids=["compacted-key-check", "recompression"],
)
def test_a_300_mb_zstd_batch_is_refused_without_the_memory(own_broker, topic_name, config, fill):
    broker = own_broker()
    create_topic(broker, topic_name, config=config)
    bomb = zstd_bomb(fill)
    assert len(bomb) < 100_000
    p = _produce(broker, topic_name, bomb)
    assert p.error_code == 10  # MESSAGE_TOO_LARGE (Kafka's RecordTooLargeException)
    assert f"decompresses to more than {64 * 1048588} bytes" in p.error_message
    assert peak_rss_mb(broker) < PEAK_LIMIT_MB
    log_mentions(broker, "Refused a batch for")
    # The broker goes on serving, and the topic takes ordinary batches.
    ok = _produce(broker, topic_name, record_batch([b"v"], keys=[b"k"], compression=4))
    assert (ok.error_code, ok.base_offset) == (0, 0)


def test_a_legacy_gzip_wrapper_of_300_mb_is_refused_without_the_memory(own_broker, topic_name):
    broker = own_broker()
    create_topic(broker, topic_name)
    bomb = gzip_legacy_bomb()
    assert len(bomb) < 400_000
    with RawClient(broker, timeout=60) as raw:
        raw.send_raw(produce_request(2, 1, topic_name, bomb))
        payload = raw.read_frame()
    _, _, _, error, _ = parse_produce_response(2, payload)
    assert error == 10  # MESSAGE_TOO_LARGE
    assert peak_rss_mb(broker) < PEAK_LIMIT_MB
