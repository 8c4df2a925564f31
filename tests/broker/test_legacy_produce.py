"""Produce v0-v2 with legacy message sets (magic 0 and 1), as pre-0.11 clients send them.

The message sets are built with aiokafka's legacy builder, an encoder independent
of ours; the records must come back to a modern consumer with their keys, values and
(for magic 1) timestamps, and the v0-v2 response layouts must be what those clients read.
"""

import struct

import pytest
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
from broker_e2e import RawClient, consume, create_topic

_SIZE = struct.Struct(">i")


def legacy_message_set(magic: int, compression: int, records) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=compression, batch_size=1 << 20)
    for offset, (key, value, ts) in enumerate(records):
        builder.append(offset, timestamp=ts, key=key, value=value)
    return bytes(builder.build())


def produce_request(version: int, correlation: int, topic: str, message_set: bytes) -> bytes:
    name = topic.encode()
    body = struct.pack(">hhih", 0, version, correlation, 4) + b"test"
    body += struct.pack(">hi", -1, 10_000)  # acks=all, timeout
    body += struct.pack(">i", 1) + struct.pack(">h", len(name)) + name
    body += struct.pack(">i", 1) + struct.pack(">ii", 0, len(message_set)) + message_set
    return _SIZE.pack(len(body)) + body


def parse_produce_response(version: int, payload: bytes):
    pos = 4  # correlation id
    (topics,) = struct.unpack_from(">i", payload, pos)
    pos += 4
    (name_len,) = struct.unpack_from(">h", payload, pos)
    pos += 2 + name_len
    (partitions,) = struct.unpack_from(">i", payload, pos)
    pos += 4
    index, error, base_offset = struct.unpack_from(">ihq", payload, pos)
    pos += 14
    if version >= 2:
        pos += 8  # log_append_time
    if version >= 1:
        pos += 4  # throttle_time_ms
    assert pos == len(payload), "response has unexpected trailing bytes"
    return topics, partitions, index, error, base_offset


@pytest.mark.parametrize(
    "version,magic,compression",
    [(0, 0, 0), (1, 0, 1), (2, 1, 0), (2, 1, 1), (2, 1, 2), (2, 1, 3)],
)
def test_legacy_produce_is_readable_by_modern_consumers(broker, topic_name, version, magic, compression):
    create_topic(broker, topic_name)
    records = [(f"k{i}".encode(), f"value-{i}".encode() * 5, 1_700_000_000_000 + i) for i in range(20)]
    base = 0
    with RawClient(broker) as client:
        for attempt in range(2):
            message_set = legacy_message_set(magic, compression, records)
            client.send_raw(produce_request(version, attempt + 1, topic_name, message_set))
            payload = client.read_frame()
            assert payload is not None, client.broker_log_about_me()
            topics, partitions, index, error, base_offset = parse_produce_response(version, payload)
            assert (topics, partitions, index, error) == (1, 1, 0, 0)
            assert base_offset == base
            base += len(records)
    got = consume(broker, topic_name, [0])[0]
    assert [(r.offset, r.key, r.value) for r in got] == [
        (i, k, v) for i, (k, v, _) in enumerate(records + records)
    ]
    if magic == 1:
        assert [r.timestamp for r in got[:20]] == [ts for _, _, ts in records]


def test_corrupt_legacy_message_set_is_rejected(broker, topic_name):
    create_topic(broker, topic_name)
    message_set = bytearray(legacy_message_set(1, 0, [(b"k", b"v", 1)]))
    message_set[-1] ^= 0xFF  # breaks the message CRC
    with RawClient(broker) as client:
        client.send_raw(produce_request(2, 1, topic_name, bytes(message_set)))
        payload = client.read_frame()
        assert payload is not None
        *_, error, base_offset = parse_produce_response(2, payload)
    assert error == 2  # CORRUPT_MESSAGE
    assert base_offset == -1
