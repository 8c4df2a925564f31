"""The Produce fast lane (handlers/produce.py ``produce_one_partition``) on a real broker.

One-partition Produce requests over a raw socket: answers that kio decodes, offsets that
follow each other, records that a real consumer reads back byte for byte; the errors the
lane (or the general path it declines to) puts in the response; acks=0 failures closing
only their connection; and pipelined requests answered in order across the lane and the
general path.
"""

from __future__ import annotations

import os
import struct
import time

from broker_e2e import (
    RawClient,
    consume,
    create_topic,
    decode_batches,
    fetch_body,
    log_mentions,
    produce_body,
    record_batch,
)
from kio.schema.errors import ErrorCode
from support import wait_until

from odradek.protocol import hot_responses
from odradek.protocol.messages import build_request, decode_response, encode_request, peek_correlation_id

PRODUCE, FETCH, METADATA = 0, 1, 3
LANE_VERSIONS = (3, 8, 9, 11)


def produce_frame(
    version: int, correlation_id: int, topic: str, partition: int, records, acks: int = -1
) -> bytes:
    entity = build_request(PRODUCE, version, produce_body(topic, partition, records, acks))
    return encode_request(PRODUCE, version, correlation_id, "fast-lane", entity)


def metadata_body(topic: str) -> dict:
    return {
        "topics": [{"name": topic, "topic_id": None}],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }


def only_partition(response, topic: str):
    (topic_response,) = response.responses
    assert topic_response.name == topic
    (part,) = topic_response.partition_responses
    return part


def corrupt(batch) -> bytes:
    data = bytearray(batch)
    data[-1] ^= 0xFF  # a record byte: covered by the CRC
    return bytes(data)


def fetched_batches(raw: RawClient, topic: str) -> tuple[list, bytes]:
    response = raw.request(FETCH, 12, fetch_body(topic, 0, 0))
    (part,) = response.responses[0].partitions
    assert part.error_code == ErrorCode.none
    return decode_batches(part.records), bytes(part.records)


# ---- the usual request ---------------------------------------------------------------------


def test_lane_versions_answer_and_store_the_exact_bytes(broker, topic_name):
    create_topic(broker, topic_name, 1)
    sent = []  # (batch bytes, values)
    with RawClient(broker) as raw:
        offset = 0
        for round_ in range(2):
            for version in LANE_VERSIONS:
                values = [
                    f"v{version}-r{round_}-{i}".encode() + os.urandom(8) for i in range(version % 4 + 1)
                ]
                batch = bytes(record_batch(values, timestamp=1_700_000_000_000 + offset))
                correlation = 1000 * round_ + version
                raw.send_raw(
                    produce_frame(version, correlation, topic_name, 0, batch, acks=-1 if round_ else 1)
                )
                frame = raw.read_frame()
                assert frame is not None, raw.broker_log_about_me()
                got, response = decode_response(PRODUCE, version, frame)
                assert got == correlation
                part = only_partition(response, topic_name)
                assert (part.index, part.error_code, part.base_offset) == (0, ErrorCode.none, offset)
                assert part.log_append_time is None  # -1: CreateTime
                if version >= 5:
                    assert part.log_start_offset == 0
                if version >= 8:
                    assert part.error_message is None and part.record_errors == ()
                # Byte for byte what the general packer would answer.
                assert struct.pack(">i", len(frame)) + frame == hot_responses.one_partition_produce_frame(
                    version, correlation, topic_name, 0, offset, -1, 0
                )
                sent.append((batch, values))
                offset += len(values)
        batches, data = fetched_batches(raw, topic_name)
    # Stored as sent: only base offset and leader epoch (the first 16 bytes minus the length) change.
    assert len(batches) == len(sent)
    pos = 0
    expected_offset = 0
    for (batch, values), stored in zip(sent, batches, strict=True):
        size = struct.unpack_from(">i", data, pos + 8)[0] + 12
        assert size == len(batch)
        assert data[pos + 16 : pos + size] == batch[16:]
        assert stored.base_offset == expected_offset and stored.validate_crc()
        pos += size
        expected_offset += len(values)
    assert pos == len(data)
    got = consume(broker, topic_name, [0])[0]
    assert [r.value for r in got] == [v for _, values in sent for v in values]
    assert [r.offset for r in got] == list(range(expected_offset))
    assert all(r.key is None for r in got)


def test_compressed_batch_through_the_lane(broker, topic_name):
    create_topic(broker, topic_name, 1, {"compression.type": "gzip"})
    values = [b"gz-%d" % i * 20 for i in range(5)]
    with RawClient(broker) as raw:
        for version, compression in ((9, 1), (11, 0)):  # gzip as is, then uncompressed recompressed
            batch = record_batch(values, compression=compression)
            response = raw.request(PRODUCE, version, produce_body(topic_name, 0, batch))
            part = only_partition(response, topic_name)
            assert part.error_code == ErrorCode.none
        batches, _ = fetched_batches(raw, topic_name)
    assert [b.compression_type for b in batches] == [1, 1]
    got = consume(broker, topic_name, [0])[0]
    assert [r.value for r in got] == values * 2


def test_log_append_time_topic_through_the_lane(broker, topic_name):
    create_topic(broker, topic_name, 1, {"message.timestamp.type": "LogAppendTime"})
    with RawClient(broker) as raw:
        for offset, version in enumerate(LANE_VERSIONS):
            before = time.time()
            response = raw.request(
                PRODUCE, version, produce_body(topic_name, 0, record_batch([b"lat"], timestamp=5))
            )
            part = only_partition(response, topic_name)
            assert (part.error_code, part.base_offset) == (ErrorCode.none, offset)
            assert part.log_append_time is not None
            assert before - 1 <= part.log_append_time.timestamp() <= time.time() + 1
    got = consume(broker, topic_name, [0])[0]
    assert [r.timestamp_type for r in got] == [2] * len(LANE_VERSIONS)  # librdkafka: LOG_APPEND_TIME
    assert all(r.timestamp > 5 for r in got)


# ---- errors ------------------------------------------------------------------------------------


def test_errors_are_answered_in_the_response(broker, topic_name):
    create_topic(broker, topic_name, 1, {"max.message.bytes": "1000"})
    good = record_batch([b"good"])
    big = record_batch([os.urandom(2000)])
    assert len(big) > 1000
    cases = [
        ("missing partition", topic_name, 5, good, -1, ErrorCode.unknown_topic_or_partition),
        ("negative partition", topic_name, -1, good, 1, ErrorCode.unknown_topic_or_partition),
        ("corrupt CRC", topic_name, 0, corrupt(good), -1, ErrorCode.corrupt_message),
        ("over max.message.bytes", topic_name, 0, big, 1, ErrorCode.message_too_large),
        ("acks=2", topic_name, 0, good, 2, ErrorCode.invalid_required_acks),
        ("acks=-2", topic_name, 0, good, -2, ErrorCode.invalid_required_acks),
        ("unknown topic", topic_name + "-nope", 0, good, -1, ErrorCode.unknown_topic_or_partition),
        ("empty records", topic_name, 0, b"", 1, ErrorCode.corrupt_message),
    ]
    with RawClient(broker) as raw:
        for version in LANE_VERSIONS:
            for what, topic, index, records, acks, code in cases:
                response = raw.request(PRODUCE, version, produce_body(topic, index, records, acks=acks))
                part = only_partition(response, topic)
                assert (part.index, part.error_code, part.base_offset) == (index, code, -1), (version, what)
                if version >= 8 and code != ErrorCode.invalid_required_acks:
                    assert part.error_message, (version, what)
        # Nothing was appended by the failures; the same connection still produces.
        for version in LANE_VERSIONS:
            response = raw.request(PRODUCE, version, produce_body(topic_name, 0, good))
            expected = LANE_VERSIONS.index(version)
            assert only_partition(response, topic_name).base_offset == expected
    assert [r.value for r in consume(broker, topic_name, [0])[0]] == [b"good"] * len(LANE_VERSIONS)


def test_internal_topic_is_refused(broker):
    with RawClient(broker) as raw:
        # FindCoordinator creates __consumer_offsets on first use.
        find = {"key_type": 0, "coordinator_keys": ["fast-lane-group"]}
        assert raw.request(10, 4, find).coordinators[0].error_code == ErrorCode.none

        def answer():
            body = produce_body("__consumer_offsets", 0, record_batch([b"sneaky"]))
            code = only_partition(raw.request(PRODUCE, 9, body), "__consumer_offsets").error_code
            return None if code == ErrorCode.unknown_topic_or_partition else code

        assert wait_until(answer, timeout=10, message="__consumer_offsets to exist") == (
            ErrorCode.invalid_topic_exception
        )


def test_acks_zero_failure_closes_only_its_connection(broker, topic_name):
    create_topic(broker, topic_name, 1)
    with RawClient(broker) as quiet, RawClient(broker) as other:
        address = quiet.local_address
        quiet.send_raw(produce_frame(9, 1, topic_name, 0, record_batch([b"silent-ok"]), acks=0))
        response = other.request(PRODUCE, 11, produce_body(topic_name, 0, record_batch([b"other-1"]), acks=1))
        assert only_partition(response, topic_name).base_offset == 1  # the acks=0 record is at 0
        quiet.send_raw(produce_frame(9, 2, topic_name, 0, corrupt(record_batch([b"bad"])), acks=0))
        # The broker sends nothing for acks=0 and closes the connection after the failure.
        assert quiet.closed_by_broker(timeout=10)
        log_mentions(broker, f"closing connection from {address}:")
        # The other connection is unaffected.
        for i in range(2, 5):
            response = other.request(
                PRODUCE, 3 if i % 2 else 9, produce_body(topic_name, 0, record_batch([b"other-%d" % i]))
            )
            part = only_partition(response, topic_name)
            assert (part.error_code, part.base_offset) == (ErrorCode.none, i)
    got = consume(broker, topic_name, [0])[0]
    assert [r.value for r in got] == [b"silent-ok", b"other-1", b"other-2", b"other-3", b"other-4"]


def test_acks_zero_success_sends_nothing(broker, topic_name):
    create_topic(broker, topic_name, 1)
    with RawClient(broker) as raw:
        frames = b"".join(
            produce_frame(v, i, topic_name, 0, record_batch([b"z%d" % i]), acks=0)
            for i, v in enumerate(LANE_VERSIONS)
        )
        raw.send_raw(frames + produce_frame(9, 99, topic_name, 0, record_batch([b"loud"]), acks=1))
        got, response = decode_response(PRODUCE, 9, raw.read_frame())
        assert got == 99  # the first (and only) answer
        assert only_partition(response, topic_name).base_offset == len(LANE_VERSIONS)
    assert [r.value for r in consume(broker, topic_name, [0])[0]] == [b"z0", b"z1", b"z2", b"z3", b"loud"]


# ---- pipelining -------------------------------------------------------------------------------------


def _read_in_order(raw: RawClient, plan: list) -> list:
    """Read one response per (correlation id, api key, version) of ``plan``, checking the order."""
    answers = []
    for correlation, api_key, version in plan:
        frame = raw.read_frame()
        assert frame is not None, raw.broker_log_about_me()
        assert peek_correlation_id(frame) == correlation, [a[0] for a in answers]
        got, response = decode_response(api_key, version, frame)
        assert got == correlation
        answers.append((correlation, api_key, response))
    return answers


def test_fifty_pipelined_requests_in_one_send(broker, topic_name):
    create_topic(broker, topic_name, 1)
    frames, plan, values = [], [], []
    for i in range(50):
        if i == 25:
            entity = build_request(METADATA, 12, metadata_body(topic_name))
            frames.append(encode_request(METADATA, 12, i, "fast-lane", entity))
            plan.append((i, METADATA, 12))
            continue
        version = LANE_VERSIONS[i % len(LANE_VERSIONS)]
        value = b"pipelined-%02d" % i
        values.append(value)
        frames.append(produce_frame(version, i, topic_name, 0, record_batch([value])))
        plan.append((i, PRODUCE, version))
    with RawClient(broker) as raw:
        raw.send_raw(b"".join(frames))
        answers = _read_in_order(raw, plan)
    assert [c for c, _, _ in answers] == list(range(50))
    offsets = []
    for _, api_key, response in answers:
        if api_key == METADATA:
            (topic,) = response.topics
            assert (topic.name, topic.error_code, len(topic.partitions)) == (topic_name, ErrorCode.none, 1)
            continue
        part = only_partition(response, topic_name)
        assert part.error_code == ErrorCode.none
        offsets.append(part.base_offset)
    assert offsets == list(range(49))
    assert [r.value for r in consume(broker, topic_name, [0])[0]] == values


def test_pipeline_behind_a_waiting_fetch_keeps_order(broker, topic_name):
    """A Fetch waiting for data holds a response slot: produce requests behind it go the
    general way and their answers wait behind the Fetch's."""
    create_topic(broker, topic_name, 1)
    idle = topic_name + "-idle"
    create_topic(broker, idle, 1)
    frames, plan = [], []
    for i in range(40):
        if i == 5:
            body = dict(fetch_body(idle, 0, 0), max_wait=400)
            frames.append(encode_request(FETCH, 12, i, "fast-lane", build_request(FETCH, 12, body)))
            plan.append((i, FETCH, 12))
        elif i in (6, 30):
            entity = build_request(METADATA, 12, metadata_body(topic_name))
            frames.append(encode_request(METADATA, 12, i, "fast-lane", entity))
            plan.append((i, METADATA, 12))
        else:
            version = LANE_VERSIONS[i % len(LANE_VERSIONS)]
            frames.append(produce_frame(version, i, topic_name, 0, record_batch([b"p%d" % i, b"q%d" % i])))
            plan.append((i, PRODUCE, version))
    with RawClient(broker) as raw:
        start = time.monotonic()
        raw.send_raw(b"".join(frames))
        answers = _read_in_order(raw, plan)
        elapsed = time.monotonic() - start
    assert elapsed >= 0.3, "the Fetch should have waited for its max_wait"
    produce_offsets = [
        only_partition(r, topic_name).base_offset for _, api_key, r in answers if api_key == PRODUCE
    ]
    assert produce_offsets == list(range(0, 2 * 37, 2))
    (fetched,) = answers[5][2].responses[0].partitions
    assert (fetched.error_code, fetched.high_watermark) == (ErrorCode.none, 0)
    expected = [v for i in range(40) if i not in (5, 6, 30) for v in (b"p%d" % i, b"q%d" % i)]
    assert [r.value for r in consume(broker, topic_name, [0])[0]] == expected
