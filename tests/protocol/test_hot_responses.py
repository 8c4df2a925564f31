"""The hand-packed Produce and Fetch responses must decode with kio exactly as intended."""

import uuid

import pytest

from odradek.protocol import hot_responses, messages


def _decode(api_key, version, parts):
    body = b"".join(bytes(p) for p in parts)
    cls = messages.response_class(api_key, version)
    entity, size = messages._reader(cls)(memoryview(body).toreadonly(), 0)
    assert size == len(body), "trailing bytes after the response"
    return entity


ORDERS_ID, X_ID = uuid.uuid4(), uuid.uuid4()


@pytest.mark.parametrize("version", range(3, 14))
def test_produce_response_decodes_with_kio(version):
    """Topics by name up to v12, by id from v13 (KIP-516)."""
    orders_key, x_key = (ORDERS_ID, X_ID) if version >= 13 else ("orders", "x")
    parts = hot_responses.produce_response(
        version,
        [(orders_key, [(0, 0, 42, -1, 7, None), (3, 10, -1, -1, -1, "too large")]), (x_key, [])],
    )
    resp = _decode(0, version, parts)
    orders = resp.responses[0]
    assert (orders.topic_id if version >= 13 else orders.name) == orders_key
    ok, bad = orders.partition_responses
    assert (ok.index, ok.error_code, ok.base_offset) == (0, 0, 42)
    assert (bad.index, bad.error_code) == (3, 10)
    if version >= 5:
        assert ok.log_start_offset == 7
    if version >= 8:
        assert bad.error_message == "too large"
    assert (resp.responses[1].topic_id if version >= 13 else resp.responses[1].name) == x_key


@pytest.mark.parametrize("version", range(3, 14))
def test_produce_response_record_errors_decode_with_kio(version):
    """KIP-467: the indexes and messages of the records that failed a batch (v8+)."""
    bad = (0, 87, -1, -1, -1, "2 record errors", [(3, "no key"), (7, None)])
    resp = _decode(0, version, hot_responses.produce_response(version, [(X_ID if version >= 13 else "c", [bad])]))
    partition = resp.responses[0].partition_responses[0]
    assert partition.error_code == 87
    if version >= 8:
        assert [(e.batch_index, e.batch_index_error_message) for e in partition.record_errors] == [
            (3, "no key"),
            (7, None),
        ]
        assert partition.error_message == "2 record errors"


@pytest.mark.parametrize("version", range(4, 13))
def test_fetch_response_decodes_with_kio(version):
    records = b"\x01\x02\x03" * 10
    parts = hot_responses.fetch_response(
        version,
        [("t", [(0, 0, 100, 90, 5, [(1, 2)], memoryview(records)), (1, 1, -1, -1, -1, None, None)])],
        session_id=0,
    )
    resp = _decode(1, version, parts)
    p0, p1 = resp.responses[0].partitions
    assert (p0.partition_index, p0.high_watermark, p0.last_stable_offset) == (0, 100, 90)
    assert bytes(p0.records) == records
    assert [(a.producer_id, a.first_offset) for a in p0.aborted_transactions] == [(1, 2)]
    assert p1.error_code == 1 and p1.records is None
    if version >= 5:
        assert p0.log_start_offset == 5


@pytest.mark.parametrize("version", range(13, 18))
def test_fetch_response_names_topics_by_id_from_v13(version):
    topic_id = uuid.uuid4()
    records = b"\x05" * 7
    parts = hot_responses.fetch_response(
        version, [(topic_id, [(2, 0, 10, 10, 0, None, memoryview(records))])], session_id=0
    )
    resp = _decode(1, version, parts)
    (topic,) = resp.responses
    assert topic.topic_id == topic_id
    (p,) = topic.partitions
    assert (p.partition_index, p.high_watermark, bytes(p.records)) == (2, 10, records)


@pytest.mark.parametrize("version", [12, 13, 17])
def test_fetch_response_carries_the_diverging_epoch_as_tagged_field_0(version):
    name = "t" if version < 13 else uuid.uuid4()
    diverged = (0, 0, 40, 40, 0, None, b"", -1, (3, 25))
    plain = (1, 0, 40, 40, 0, None, memoryview(b"\x07" * 9))
    resp = _decode(1, version, hot_responses.fetch_response(version, [(name, [diverged, plain])]))
    p0, p1 = resp.responses[0].partitions
    assert (p0.diverging_epoch.epoch, p0.diverging_epoch.end_offset) == (3, 25)
    assert (p1.diverging_epoch.epoch, p1.diverging_epoch.end_offset) == (-1, -1)
    assert bytes(p1.records) == b"\x07" * 9
