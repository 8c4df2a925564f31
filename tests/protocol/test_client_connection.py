"""The sans-IO requesting side of a connection: frames out, responses in, no sockets."""

from __future__ import annotations

import struct

import pytest

from odradek.protocol import api_keys, messages
from odradek.protocol.client_connection import ClientConnection, FrameError
from odradek.protocol.client_versions import client_versions
from odradek.protocol.errors import error_for

METADATA_V = 9


def answer(api_key: int, version: int, correlation_id: int, data: dict) -> bytes:
    """A broker's response frame (size prefix included)."""
    entity = messages.build_response(api_key, version, data)
    return messages.encode_response(api_key, version, correlation_id, entity)


def metadata_answer(correlation_id: int, cluster_id: str) -> bytes:
    return answer(
        api_keys.METADATA,
        METADATA_V,
        correlation_id,
        {"throttle_time": 0, "brokers": [], "cluster_id": cluster_id, "controller_id": 1, "topics": []},
    )


def api_versions_answer(correlation_id: int, version: int, error_code: int = 0, keys=None) -> bytes:
    keys = keys if keys is not None else {api_keys.METADATA: (0, 12), api_keys.PRODUCE: (0, 11)}
    return answer(
        api_keys.API_VERSIONS,
        version,
        correlation_id,
        {
            "error_code": error_code,
            "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in keys.items()],
            "throttle_time": 0,
        },
    )


def feed(conn: ClientConnection, data: bytes, step: int | None = None) -> list:
    """Receive ``data`` as a stream transport would, ``step`` bytes per receive at most."""
    out = []
    pos = 0
    while pos < len(data):
        room = conn.get_buffer()
        n = min(len(room), len(data) - pos, step or len(data))
        room[:n] = data[pos : pos + n]
        pos += n
        out += conn.received(n)
    return out


def test_a_request_is_a_frame_with_its_correlation_id_and_client_id():
    conn = ClientConnection("me")
    cid, frame = conn.request(api_keys.METADATA, METADATA_V, {"topics": None}, token="t")
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    header, pos = messages.parse_request_header(memoryview(frame)[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        api_keys.METADATA,
        METADATA_V,
        cid,
        "me",
    )
    body = messages.decode_request_body(header, memoryview(frame)[4:], pos)
    assert body.topics is None
    assert conn.in_flight == 1 and conn.in_flight_request(cid) == (api_keys.METADATA, METADATA_V, "t")


def test_correlation_ids_count_up_and_wrap():
    conn = ClientConnection(None)
    ids = [conn.request(api_keys.METADATA, METADATA_V, {}, expect_response=False)[0] for _ in range(3)]
    assert ids == [1, 2, 3]
    assert conn.in_flight == 0  # nothing awaited without a response
    conn._next_correlation_id = 0x7FFFFFFF
    assert conn.request(api_keys.METADATA, METADATA_V, {})[0] == 0x7FFFFFFF
    assert conn.request(api_keys.METADATA, METADATA_V, {})[0] == 1


def test_answers_are_matched_by_correlation_id_whatever_their_order_and_split():
    conn = ClientConnection("me")
    first, _ = conn.request(api_keys.METADATA, METADATA_V, {}, token="first")
    second, _ = conn.request(api_keys.METADATA, METADATA_V, {}, token="second")
    assert conn.oldest_in_flight() == first
    stream = metadata_answer(second, "b") + metadata_answer(first, "a")
    got = feed(conn, stream, step=3)  # byte boundaries anywhere
    assert [(r.correlation_id, r.token, r.entity.cluster_id, r.error) for r in got] == [
        (second, "second", "b", None),
        (first, "first", "a", None),
    ]
    assert conn.in_flight == 0


def test_a_frame_read_whole_by_the_transport_gives_the_same_response():
    conn = ClientConnection("me")
    cid, _ = conn.request(api_keys.METADATA, METADATA_V, {}, token=7)
    response = conn.response(memoryview(metadata_answer(cid, "x"))[4:])
    assert (response.token, response.entity.cluster_id) == (7, "x")


def test_unknown_ids_and_undecodable_answers_are_errors_not_crashes():
    conn = ClientConnection("me")
    cid, _ = conn.request(api_keys.METADATA, METADATA_V, {}, token="m")
    (unknown,) = feed(conn, metadata_answer(cid + 5, "x"))
    assert unknown.token is None and "unknown correlation id" in str(unknown.error)
    garbage = struct.pack(">ii", 6, cid) + b"\xff\xff"
    (bad,) = feed(conn, garbage)
    assert bad.token == "m" and bad.entity is None and isinstance(bad.error, messages.MalformedResponse)
    assert conn.in_flight == 0


def test_a_bad_size_prefix_is_a_frame_error():
    conn = ClientConnection("me", max_response_size=1000)
    with pytest.raises(FrameError):
        feed(conn, struct.pack(">i", 5000) + b"x")
    with pytest.raises(FrameError):
        feed(ClientConnection("me"), struct.pack(">i", -1))
    with pytest.raises(FrameError):
        feed(ClientConnection("me"), struct.pack(">i", 2) + b"ab")  # no room for a correlation id
    # a short frame behind a good one: nothing is taken out of flight before the error
    conn = ClientConnection("me")
    cid, _ = conn.request(api_keys.METADATA, METADATA_V, {}, token="kept")
    with pytest.raises(FrameError):
        feed(conn, metadata_answer(cid, "x") + struct.pack(">i", 2) + b"ab")
    assert conn.fail_all() == ["kept"]


def test_forget_and_fail_all_hand_the_tokens_back():
    conn = ClientConnection("me")
    ids = [conn.request(api_keys.METADATA, METADATA_V, {}, token=f"t{i}")[0] for i in range(3)]
    assert conn.forget(ids[1]) == "t1" and conn.forget(ids[1]) is None
    assert conn.fail_all() == ["t0", "t2"]
    assert conn.in_flight == 0
    (late,) = feed(conn, metadata_answer(ids[0], "x"))
    assert late.token is None  # an answer after the failure matches nothing


def test_parts_packed_by_hand_get_the_next_correlation_id():
    conn = ClientConnection("me")
    seen = []
    cid, parts = conn.request_parts(api_keys.PRODUCE, 9, lambda c: seen.append(c) or [b"a", b"b"], token=1)
    assert seen == [cid] and parts == [b"a", b"b"] and conn.in_flight_request(cid) == (api_keys.PRODUCE, 9, 1)
    assert conn.request(api_keys.METADATA, METADATA_V, {})[0] == cid + 1


def test_a_request_that_cannot_be_built_leaves_nothing_in_flight():
    conn = ClientConnection("me")
    with pytest.raises(Exception):  # noqa: B017 - kio's own error for a wrong field type
        conn.request(api_keys.METADATA, METADATA_V, {"topics": 5})
    assert conn.in_flight == 0
    assert conn.request(api_keys.METADATA, METADATA_V, {})[0] == 1


def test_api_versions_negotiation_picks_the_highest_common_version():
    conn = ClientConnection("me")
    version, values = conn.api_versions_request()
    assert version == client_versions(api_keys.API_VERSIONS).stop - 1
    assert values["client_software_name"] == "odradek-python"
    cid, _ = conn.request(api_keys.API_VERSIONS, version, values)
    (response,) = feed(conn, api_versions_answer(cid, version))
    assert conn.api_versions_answered(response.entity)
    assert conn.versions == {api_keys.METADATA: 12, api_keys.PRODUCE: 11}
    assert conn.broker_versions[api_keys.PRODUCE] == (0, 11)
    assert conn.supports(api_keys.PRODUCE) and not conn.supports(api_keys.FETCH)


def test_api_versions_steps_down_when_the_broker_answers_in_v0():
    conn = ClientConnection("me")
    version, values = conn.api_versions_request()
    cid, _ = conn.request(api_keys.API_VERSIONS, version, values)
    # An older broker answers UNSUPPORTED_VERSION in v0, naming what it speaks.
    stream = api_versions_answer(cid, 0, error_code=35, keys={api_keys.API_VERSIONS: (0, 1)})
    (response,) = feed(conn, stream)
    assert response.error is None  # decoded as v0 after the v3 decode failed
    assert not conn.api_versions_answered(response.entity)
    assert conn.api_versions_request()[0] == 1
    with pytest.raises(error_for(-1)):
        conn.api_versions_answered(
            messages.build_response(18, 1, {"error_code": -1, "api_keys": [], "throttle_time": 0})
        )


def test_version_caps_limit_the_apis_and_versions():
    conn = ClientConnection("spark", version_caps={api_keys.METADATA: 9})
    version, values = conn.api_versions_request()
    cid, _ = conn.request(api_keys.API_VERSIONS, version, values)
    (response,) = feed(conn, api_versions_answer(cid, version))
    assert conn.api_versions_answered(response.entity)
    assert conn.versions == {api_keys.METADATA: 9}
