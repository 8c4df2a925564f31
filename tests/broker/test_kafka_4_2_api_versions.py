"""Our ApiVersions against Kafka 4.2's, version by version.

``kafka_4_2_api_versions.tsv`` is Kafka 4.2's table, derived from its message schemas, with
what Odradek does about each API and, where it does not serve 4.2's range, why. The broker's
answer (a real broker process, a raw ApiVersions v3 request) must agree with it row by row.
Also here: the new fields' behaviour (Produce v13 by topic id, ListOffsets v10-v11)."""

from __future__ import annotations

import csv
import uuid
from pathlib import Path
from typing import NamedTuple

import pytest
from broker_e2e import RawClient, consume, create_topic, record_batch
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map

API_VERSIONS, PRODUCE, LIST_OFFSETS = 18, 0, 2
TABLE = Path(__file__).with_name("kafka_4_2_api_versions.tsv")

class Row(NamedTuple):
    key: int
    name: str
    min: int
    max: int
    scope: str
    odradek: str
    reason: str


def kafka_4_2() -> dict[int, Row]:
    lines = [line for line in TABLE.read_text().splitlines() if line and not line.startswith("#")]
    rows = {}
    for fields in csv.reader(lines, delimiter="\t"):
        key, name, low, high, scope, odradek, *reason = fields
        rows[int(key)] = Row(int(key), name, int(low), int(high), scope, odradek, "".join(reason).strip())
    return rows


def our_api_versions(broker) -> dict[int, tuple[int, int]]:
    with RawClient(broker) as raw:
        response = raw.request(
            API_VERSIONS, 3, {"client_software_name": "odradek-tests", "client_software_version": "1"}
        )
    assert response.error_code == ErrorCode.none
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def test_the_table_is_complete_and_explains_every_difference():
    rows = kafka_4_2()
    assert set(rows) >= set(api_key_map), "an API kio knows is missing from the table"
    for row in rows.values():
        assert row.odradek in {"served", "left-out", "extra", "differs"}, row
        assert row.scope in {"broker", "controller", "zk-only"}, row
        if row.odradek != "served":
            assert len(row.reason) > 20, f"{row.name}: say why Odradek does not serve Kafka 4.2's versions"
        if row.scope == "controller":
            assert row.odradek == "left-out", f"{row.name}: a 4.2 broker does not advertise controller APIs"


def test_our_api_versions_match_kafka_4_2_version_by_version(broker):
    ours = our_api_versions(broker)
    problems = []
    for key, row in sorted(kafka_4_2().items()):
        got = ours.get(key)
        want = (row.min, row.max)
        if row.odradek == "served" and got != want:
            problems.append(f"{row.name} ({key}): we advertise {got}, Kafka 4.2 {want}")
        elif row.odradek == "left-out" and got is not None:
            problems.append(f"{row.name} ({key}): advertised {got} but listed as left out")
        elif row.odradek == "extra" and got is None:
            problems.append(f"{row.name} ({key}): listed as served beyond Kafka 4.2 but not advertised")
        elif row.odradek == "differs" and (got is None or got[1] >= row.max or got[0] != row.min):
            problems.append(f"{row.name} ({key}): advertised {got}; update the table (4.2: {want})")
    unknown = sorted(set(ours) - set(kafka_4_2()))
    assert not unknown, f"advertised APIs the table does not list: {unknown}"
    assert not problems, "\n".join(problems)


def test_produce_v13_names_topics_by_id(broker):
    topic = "produce-v13-by-id"
    create_topic(broker, topic, 1)
    with RawClient(broker) as raw:
        meta = raw.request(
            3,
            12,
            {
                "topics": [{"name": topic, "topic_id": None}],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        topic_id = meta.topics[0].topic_id
        body = {
            "acks": -1,
            "timeout": 10000,
            "topic_data": [
                {
                    "topic_id": topic_id,
                    "partition_data": [{"index": 0, "records": bytes(record_batch([b"by-id"]))}],
                },
                {
                    "topic_id": uuid.uuid4(),
                    "partition_data": [{"index": 0, "records": bytes(record_batch([b"lost"]))}],
                },
            ],
        }
        response = raw.request(PRODUCE, 13, body)
    known, unknown = response.responses
    assert known.topic_id == topic_id
    assert [(p.error_code, p.base_offset) for p in known.partition_responses] == [(ErrorCode.none, 0)]
    assert [p.error_code for p in unknown.partition_responses] == [ErrorCode.unknown_topic_id]
    assert [r.value for r in consume(broker, topic, [0])[0]] == [b"by-id"]


@pytest.fixture(scope="module")
def two_records(broker) -> str:
    topic = "list-offsets-4-2"
    create_topic(broker, topic, 1)
    with RawClient(broker) as raw:
        raw.request(
            PRODUCE,
            11,
            {
                "acks": 1,
                "timeout": 5000,
                "topic_data": [
                    {
                        "name": topic,
                        "partition_data": [{"index": 0, "records": bytes(record_batch([b"a", b"b"]))}],
                    }
                ],
            },
        )
    return topic


@pytest.mark.parametrize(
    ("version", "timestamp", "error"),
    [
        (11, -6, ErrorCode.none),  # earliest pending upload: nothing is tiered
        (10, -6, ErrorCode.unsupported_version),  # -6 came with v11
        (8, -5, ErrorCode.unsupported_version),  # latest tiered came with v9
        (11, -7, ErrorCode.unsupported_version),  # no such special timestamp
        (10, -2, ErrorCode.none),
    ],
)
def test_list_offsets_special_timestamps_by_version(broker, two_records, version, timestamp, error):
    topic = two_records
    with RawClient(broker) as raw:
        response = raw.request(
            LIST_OFFSETS,
            version,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "timeout": 1000,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": 0, "timestamp": timestamp, "current_leader_epoch": -1}
                        ],
                    }
                ],
            },
        )
    (part,) = response.topics[0].partitions
    assert part.error_code == error
    if timestamp == -6:
        assert (part.offset, part.timestamp, part.leader_epoch) == (-1, -1, -1)
    if timestamp == -2:
        assert part.offset == 0


@pytest.mark.parametrize(
    ("allow", "error"),
    [(False, ErrorCode.invalid_replication_factor), (True, ErrorCode.invalid_replica_assignment)],
)
def test_reassignment_v1_may_refuse_to_change_the_replication_factor(broker, two_records, allow, error):
    """KIP-860: with allow_replication_factor_change false, two replicas for a one-replica
    partition is refused as such (a single node would otherwise refuse the second replica)."""
    with RawClient(broker) as raw:
        response = raw.request(
            45,
            1,
            {
                "timeout": 5000,
                "allow_replication_factor_change": allow,
                "topics": [{"name": two_records, "partitions": [{"partition_index": 0, "replicas": [0, 1]}]}],
            },
        )
    assert response.allow_replication_factor_change is allow
    assert [p.error_code for t in response.responses for p in t.partitions] == [error]


def test_describe_cluster_v2_marks_no_broker_fenced(broker):
    with RawClient(broker) as raw:
        response = raw.request(
            60,
            2,
            {
                "include_cluster_authorized_operations": False,
                "endpoint_type": 1,
                "include_fenced_brokers": True,
            },
        )
    assert response.error_code == ErrorCode.none
    assert [(b.port, b.is_fenced) for b in response.brokers] == [(broker.port, False)]


def test_the_group_protocol_features_are_finalized_as_kafka_4_2_reports_them(broker):
    """A default broker has consumer and share groups on: group.version and share.version at 1."""
    with RawClient(broker) as raw:
        response = raw.request(
            API_VERSIONS, 3, {"client_software_name": "odradek-tests", "client_software_version": "1"}
        )
    finalized = {f.name: (f.min_version_level, f.max_version_level) for f in response.finalized_features}
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    assert finalized == {"group.version": (1, 1), "share.version": (1, 1)}
    assert supported == {"group.version": (0, 1), "share.version": (0, 1)}
    assert response.finalized_features_epoch >= 0
