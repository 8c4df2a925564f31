"""Frames that used to abort the broker or slip a null past the schema (issue 12, parts 1 and 6).

kio's native reader reserves room for as many items as an array's length claims, before
reading one: a compact array length of about 2**32 aborted the whole process. And a -1
(or compact 0) length for an array the schema does not allow to be null reached the
handlers as None. Both must now close that one connection with a log line saying why,
while a confluent-kafka producer and consumer on the same broker keep working.
"""

from __future__ import annotations

import dataclasses
import io
import os
import socket
import subprocess
import sys
import threading
import time
import uuid

import pytest
from broker_e2e import RawClient, create_topic, log_mentions
from kio.serial._introspect import get_field_tag
from kio.serial._serialize import get_field_writer
from test_bad_input import Bystander, header

from odradek.protocol.messages import build_request, request_class

# Captured from librdkafka requests with their array lengths made hostile (size prefix included).
HUGE_ARRAY_FRAMES = {
    "list-offsets-v7": "000000300002000700000008000772646b61666b6100ffffffff01ffffffff31020000000100000000"
    "fffffffffffffffe000000",
    "offset-fetch-v9": "00000020000900090000000a000772646b61666b6100fffffffe6700ffffffff00000000",
    # ApiVersions v3: its first compact length (client_software_name) is ff ff ff ff 0f
    "api-versions-v3": "0000001e0012000300000001000772646b61666b6100ffffffff0f" + "61" * 8,
}


@pytest.fixture(scope="module")
def bystander(broker):
    topic = f"hostile-bystander-{os.getpid()}-{time.monotonic_ns()}"
    create_topic(broker, topic, 1)
    b = Bystander(broker, topic)
    yield b
    b.close()


def closed_with_reason(broker, raw: RawClient, address: str, reason: str) -> str:
    assert raw.closed_by_broker(timeout=10), "the broker kept the connection open"
    line = log_mentions(broker, f"closing connection from {address}:")
    assert reason in line, line
    assert broker.proc.poll() is None, "the broker died"
    return line


@pytest.mark.parametrize("name", list(HUGE_ARRAY_FRAMES))
def test_huge_compact_array_length_closes_connection_and_broker_keeps_serving(broker, bystander, name):
    with RawClient(broker) as raw:
        address = raw.local_address
        raw.send_raw(bytes.fromhex(HUGE_ARRAY_FRAMES[name]))
        closed_with_reason(broker, raw, address, "runs past the end of the frame")
    bystander.check()


def test_huge_classic_array_length_closes_connection(broker, bystander):
    """The same attack on a non-flexible version: an int32 array length of 2**31 - 1."""
    body = b"\xff\xff\xff\xff" + b"\x00" + b"\x7f\xff\xff\xff"  # ListOffsets v2: replica, isolation, topics
    payload = header(2, 2) + body
    with RawClient(broker) as raw:
        address = raw.local_address
        raw.send_raw(len(payload).to_bytes(4, "big") + payload)
        closed_with_reason(broker, raw, address, "runs past the end of the frame")
    bystander.check()


# Each API whose handler got None for a non-nullable array, with a request whose top-level
# array ``field`` the test then sends as null.
NULL_ARRAYS = [
    (19, 7, "topics", {"topics": [], "timeout": 1000, "validate_only": False}),
    (19, 4, "topics", {"topics": [], "timeout": 1000, "validate_only": False}),
    (2, 7, "topics", {"replica_id": -1, "isolation_level": 0, "topics": []}),
    (2, 3, "topics", {"replica_id": -1, "isolation_level": 0, "topics": []}),
    (10, 4, "coordinator_keys", {"key_type": 0, "coordinator_keys": []}),
    (9, 9, "groups", {"groups": [], "require_stable": False}),
    (9, 1, "topics", {"group_id": "g", "topics": []}),  # nullable (all topics) from v2
    (24, 5, "transactions", {"transactions": []}),
    (24, 3, "v3_and_below_topics", {
        "v3_and_below_transactional_id": "t",
        "v3_and_below_producer_id": 1,
        "v3_and_below_producer_epoch": 0,
        "v3_and_below_topics": [],
    }),
    (14, 5, "assignments", {
        "group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None,
        "protocol_type": "consumer", "protocol_name": "range", "assignments": [],
    }),
    (21, 2, "topics", {"topics": [], "timeout": 1000}),
    (37, 3, "topics", {"topics": [], "timeout": 1000, "validate_only": False}),
    (37, 1, "topics", {"topics": [], "timeout": 1000, "validate_only": False}),
    (8, 9, "topics", {
        "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [],
    }),
]


def body_with_null(api_key: int, version: int, field_name: str, values: dict) -> bytes:
    """The request body kio would write, except that array ``field_name`` is sent as null."""
    cls = request_class(api_key, version)
    entity = build_request(api_key, version, values)
    out = io.BytesIO()
    for field in dataclasses.fields(cls):
        if get_field_tag(field) is not None:
            continue
        if field.name == field_name:
            out.write(b"\x00" if cls.__flexible__ else b"\xff\xff\xff\xff")
            continue
        get_field_writer(field, cls.__flexible__, False, False)(out, getattr(entity, field.name))
    if cls.__flexible__:
        out.write(b"\x00")  # no tagged fields
    return out.getvalue()


@pytest.mark.parametrize(
    "api_key,version,field_name,values",
    NULL_ARRAYS,
    ids=[f"{request_class(k, v).__name__}-v{v}" for k, v, _, _ in NULL_ARRAYS],
)
def test_null_array_where_schema_forbids_it_closes_connection(
    broker, bystander, api_key, version, field_name, values
):
    payload = header(api_key, version) + (b"\x00" if request_class(api_key, version).__flexible__ else b"")
    payload += body_with_null(api_key, version, field_name, values)
    with RawClient(broker) as raw:
        address = raw.local_address
        raw.send_raw(len(payload).to_bytes(4, "big") + payload)
        closed_with_reason(broker, raw, address, "null array where the schema forbids it")
    bystander.check(more=5)


def test_nullable_array_may_still_be_null(broker):
    """Null stays legal where the schema allows it: Metadata's topics (null = all topics)."""
    with RawClient(broker) as raw:
        response = raw.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": False})
        assert response.brokers


# -- a hostile broker must not abort its client -------------------------------------------------


def hostile_broker(answer: bytes) -> tuple[socket.socket, threading.Thread]:
    """A listener that answers the first request of each connection with ``answer`` (its
    correlation id patched in) and then closes."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                size = int.from_bytes(conn.recv(4, socket.MSG_WAITALL), "big")
                request = conn.recv(size, socket.MSG_WAITALL)
                body = request[4:8] + answer  # the correlation id, then the hostile body
                conn.sendall(len(body).to_bytes(4, "big") + body)
                conn.recv(1)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


CLIENT_CONNECTS = """
import asyncio, sys
from odradek.net.connection import Connection
async def main():
    conn = Connection("127.0.0.1", int(sys.argv[1]), -1, "hostile-test", 5000)
    try:
        await conn.connect(5)
    except Exception as exc:
        print("client error:", exc)
asyncio.run(main())
"""


def test_hostile_api_versions_response_does_not_abort_the_client():
    # ApiVersions v3 response: error 0, then api_keys with compact length ff ff ff ff 0f
    listener, _ = hostile_broker(b"\x00\x00" + b"\xff\xff\xff\xff\x0f" + b"\x00" * 16)
    try:
        port = listener.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-c", CLIENT_CONNECTS, str(port)], capture_output=True, text=True, timeout=60
        )
    finally:
        listener.close()
    assert done.returncode == 0, done.stderr[-2000:]
    assert "client error:" in done.stdout and "cannot decode" in done.stdout, done.stdout


# -- found by benchmarks/fuzz_broker.py ------------------------------------------------------------

# Metadata v11 asking for a topic by id with a null name: v11 responses cannot carry a null
# name, so encoding the answer failed outside the handler and the connection dropped with
# no reason logged.
METADATA_V11_NULL_NAME = (
    "0003000b00000402000772646b61666b61000200000000008f23c14a9c0e1d5421000000000000000000000000313900010000"
)


def test_metadata_v11_null_topic_name_closes_connection_with_reason(broker, bystander):
    payload = bytes.fromhex(METADATA_V11_NULL_NAME)
    with RawClient(broker) as raw:
        address = raw.local_address
        raw.send_raw(len(payload).to_bytes(4, "big") + payload)
        line = closed_with_reason(broker, raw, address, "topic name can not be null for version 11")
        assert "INVALID_REQUEST" in line
    bystander.check(more=5)


def test_metadata_v12_null_topic_name_answers_unknown_topic_id(broker):
    with RawClient(broker) as raw:
        response = raw.request(
            3,
            12,
            {
                "topics": [{"name": None, "topic_id": None}, {"name": None, "topic_id": uuid.UUID(int=7)}],
                "allow_auto_topic_creation": True,
                "include_topic_authorized_operations": False,
            },
        )
    assert [(t.name, t.error_code) for t in response.topics] == [(None, 100), (None, 100)]
