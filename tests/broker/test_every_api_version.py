"""Every version the broker advertises answers a real request.

The test reads the broker's ApiVersions and, for each API key and each version in its
range, sends a well-formed request built from kio's classes for that version (from the
catalogue below, which lists the union of fields over all versions; ``build_request``
keeps those the version has). Each must get a response with the right correlation id
that decodes at that version — never a closed connection. Error codes in the answers are
fine (a Heartbeat from a stranger is UNKNOWN_MEMBER_ID); the handler must just cope with
every version's fields.
"""

from __future__ import annotations

import uuid

import pytest
from broker_e2e import RawClient, create_topic, decode_batches, produce_body, record_batch
from kio.schema.errors import ErrorCode
from test_legacy_produce import legacy_message_set, parse_produce_response
from test_legacy_produce import produce_request as legacy_produce_request

from odradek.protocol import wellformed
from odradek.protocol.messages import (
    MalformedResponse,
    api_name,
    decode_response,
    is_flexible,
    request_class,
    response_class,
)
from odradek.protocol.varint import skip_tagged_fields

PRODUCE, API_VERSIONS, DESCRIBE_TRANSACTIONS = 0, 18, 65
TOPIC = "every-version"


def catalogue(api_key: int, version: int, records: bytes) -> dict:
    """A sensible request of ``api_key``: the fields of every version it exists in."""
    topic, group, txn = TOPIC, f"every-group-v{version}", "every-txn"
    return {
        0: lambda: {
            "transactional_id": None,
            "acks": 1,
            "timeout": 5000,
            # v13 names the topic by id: the all-zero id names none, answered UNKNOWN_TOPIC_ID
            "topic_data": [
                {"name": topic, "topic_id": uuid.UUID(int=0), "partition_data": [{"index": 0, "records": records}]}
            ],
        },
        1: lambda: {
            "replica_id": -1,
            "max_wait": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "topic_id": uuid.UUID(int=0),  # v13+: names no topic, answered UNKNOWN_TOPIC_ID
                    "partitions": [
                        {
                            "partition": 0,
                            "fetch_offset": 0,
                            "partition_max_bytes": 1 << 20,
                            "log_start_offset": -1,
                            "current_leader_epoch": -1,
                            "last_fetched_epoch": -1,
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
        2: lambda: {
            "replica_id": -1,
            "isolation_level": 0,
            "timeout": 5000,  # v10+
            "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}]}
            ],
        },
        3: lambda: {
            "topics": [{"name": topic, "topic_id": None}],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        },
        # the controller's requests (cluster mode): a single node answers INVALID_REQUEST
        4: lambda: {
            "controller_id": 1,
            "controller_epoch": 1,
            "broker_epoch": -1,
            "type": 0,
            "topic_states": [
                {
                    "topic_name": topic,
                    "topic_id": None,
                    "partition_states": [
                        {
                            "partition_index": 0,
                            "controller_epoch": 1,
                            "leader": 0,
                            "leader_epoch": 0,
                            "isr": [0],
                            "partition_epoch": 0,
                            "replicas": [0],
                        }
                    ],
                }
            ],
            "live_leaders": [],
        },
        5: lambda: {
            "controller_id": 1,
            "controller_epoch": 1,
            "broker_epoch": -1,
            "topic_states": [
                {"topic_name": topic, "partition_states": [{"partition_index": 0, "delete_partition": False}]}
            ],
        },
        6: lambda: {"controller_id": 1, "controller_epoch": 1, "broker_epoch": -1, "topic_states": [], "live_brokers": []},
        7: lambda: {"broker_id": 0, "broker_epoch": -1},
        8: lambda: {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "retention_time": -1,
            "group_instance_id": None,
            "topics": [
                {
                    "name": topic,
                    "topic_id": None,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 1,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        },
        9: lambda: {
            "group_id": group,
            "topics": [{"name": topic, "partition_indexes": [0]}],
            "require_stable": False,
            "groups": [
                {
                    "group_id": group,
                    "member_id": None,
                    "member_epoch": -1,
                    "topics": [{"name": topic, "topic_id": None, "partition_indexes": [0]}],
                }
            ],
        },
        10: lambda: {"key": group, "key_type": 0, "coordinator_keys": [group]},
        11: lambda: {
            "group_id": group,
            "session_timeout": 6000,
            "rebalance_timeout": 1000,
            "member_id": "",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"}],
            "reason": None,
        },
        12: lambda: {"group_id": group, "generation_id": 1, "member_id": "stranger", "group_instance_id": None},
        13: lambda: {
            "group_id": group,
            "member_id": "stranger",
            "members": [{"member_id": "stranger", "group_instance_id": None, "reason": None}],
        },
        14: lambda: {
            "group_id": group,
            "generation_id": 1,
            "member_id": "stranger",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [],
        },
        15: lambda: {"groups": [group], "include_authorized_operations": False},
        16: lambda: {"states_filter": [], "types_filter": []},
        18: lambda: {"client_software_name": "every-version", "client_software_version": "1.0"},
        19: lambda: {
            "topics": [
                {
                    "name": f"every-created-v{version}",
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": "retention.ms", "value": "3600000"}],
                }
            ],
            "timeout": 5000,
            "validate_only": False,
        },
        20: lambda: {
            "topic_names": [f"every-absent-v{version}"],
            "topics": [{"name": f"every-absent-v{version}", "topic_id": None}],
            "timeout": 5000,
        },
        21: lambda: {
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": 0}]}],
            "timeout": 5000,
        },
        22: lambda: {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1, "producer_epoch": -1},
        23: lambda: {
            "replica_id": -1,
            "topics": [
                {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}
            ],
        },
        24: lambda: {
            "v3_and_below_transactional_id": txn,
            "v3_and_below_producer_id": 1,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
            "transactions": [
                {
                    "transactional_id": txn,
                    "producer_id": 1,
                    "producer_epoch": 0,
                    "verify_only": False,
                    "topics": [{"name": topic, "partitions": [0]}],
                }
            ],
        },
        25: lambda: {"transactional_id": txn, "producer_id": 1, "producer_epoch": 0, "group_id": group},
        26: lambda: {"transactional_id": txn, "producer_id": 1, "producer_epoch": 0, "committed": False},
        27: lambda: {
            "markers": [
                {
                    "producer_id": 424242,
                    "producer_epoch": 0,
                    "transaction_result": False,
                    "topics": [{"name": topic, "partition_indexes": [0]}],
                    "coordinator_epoch": 0,
                    "transaction_version": 0,
                }
            ]
        },
        28: lambda: {
            "transactional_id": txn,
            "group_id": group,
            "producer_id": 1,
            "producer_epoch": 0,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 1,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "",
                        }
                    ],
                }
            ],
        },
        32: lambda: {
            "resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": None}],
            "include_synonyms": False,
            "include_documentation": False,
        },
        33: lambda: {
            "resources": [
                {"resource_type": 2, "resource_name": topic, "configs": [{"name": "retention.ms", "value": "7200000"}]}
            ],
            "validate_only": True,
        },
        34: lambda: {"dirs": [{"path": "/no-such-log-dir", "topics": [{"name": topic, "partitions": [0]}]}]},
        35: lambda: {"topics": [{"topic": topic, "partitions": [0, 1]}]},
        37: lambda: {
            "topics": [{"name": topic, "count": 3, "assignments": None}],
            "timeout": 5000,
            "validate_only": True,
        },
        42: lambda: {"groups_names": [f"every-absent-group-v{version}"]},
        43: lambda: {"election_type": 0, "topic_partitions": [{"topic": topic, "partitions": [0]}], "timeout": 5000},
        45: lambda: {"timeout": 5000, "topics": [{"name": topic, "partitions": [{"partition_index": 0, "replicas": [0]}]}]},
        46: lambda: {"timeout": 5000, "topics": None},
        44: lambda: {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": topic,
                    "configs": [{"name": "retention.ms", "config_operation": 0, "value": "7200000"}],
                }
            ],
            "validate_only": True,
        },
        47: lambda: {"group_id": group, "topics": [{"name": topic, "partitions": [{"partition_index": 0}]}]},
        61: lambda: {"topics": [{"name": topic, "partition_indexes": [0]}]},
        74: lambda: {"resource_types": [2, 4]},
        17: lambda: {"mechanism": "PLAIN"},  # a PLAINTEXT listener: ILLEGAL_SASL_STATE
        36: lambda: {"auth_bytes": b"\x00u\x00p"},
        50: lambda: {"users": [{"name": "every-user"}]},
        29: lambda: {  # no authorizer: SECURITY_DISABLED
            "resource_type_filter": 1,
            "resource_name_filter": None,
            "pattern_type_filter": 1,
            "principal_filter": None,
            "host_filter": None,
            "operation": 1,
            "permission_type": 1,
        },
        30: lambda: {"creations": []},
        48: lambda: {"components": [], "strict": False},
        49: lambda: {"entries": [], "validate_only": True},
        31: lambda: {"filters": []},
        51: lambda: {"deletions": [{"name": "every-user", "mechanism": 1}], "upsertions": []},
        75: lambda: {"topics": [{"name": topic}], "response_partition_limit": 10, "cursor": None},
        60: lambda: {"include_cluster_authorized_operations": False, "endpoint_type": 1, "include_fenced_brokers": False},
        65: lambda: {"transactional_ids": [txn]},
        66: lambda: {"state_filters": [], "producer_id_filters": [], "duration_filter": -1, "transactional_id_pattern": None},
        68: lambda: {"group_id": group, "member_id": "every-member", "member_epoch": 0, "rebalance_timeout": 30000,
                     "subscribed_topic_names": [topic], "topic_partitions": []},
        69: lambda: {"group_ids": [group], "include_authorized_operations": False},
        # share groups (KIP-932, on by default)
        76: lambda: {"group_id": group, "member_id": "every-member", "member_epoch": 0, "rack_id": None,
                     "subscribed_topic_names": [topic]},
        77: lambda: {"group_ids": [group], "include_authorized_operations": False},
        78: lambda: {"group_id": group, "member_id": "every-member", "share_session_epoch": 0, "max_wait": 0,
                     "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10,
                     "share_acquire_mode": 0, "is_renew_ack": False, "topics": [], "forgotten_topics_data": []},
        79: lambda: {"group_id": group, "member_id": "every-member", "share_session_epoch": 5, "is_renew_ack": False,
                     "topics": []},
        83: lambda: {"group_id": group, "topics": []},
        84: lambda: {"group_id": group, "topics": []},
        85: lambda: {"group_id": group, "topics": []},
        86: lambda: {"group_id": group, "topics": []},
        87: lambda: {"group_id": group, "topics": []},
        90: lambda: {"groups": [{"group_id": group, "topics": None}]},
        91: lambda: {"group_id": group, "topics": []},
        92: lambda: {"group_id": group, "topics": []},
    }[api_key]()


@pytest.fixture(scope="module")
def every_broker(tmp_path_factory):
    from odradek.testing.process import BrokerProcess

    proc = BrokerProcess(
        tmp_path_factory.mktemp("every") / "data", overrides={"group.initial.rebalance.delay.ms": "0"}
    )
    proc.start()
    create_topic(proc, TOPIC, 2)
    yield proc
    proc.stop()


def advertised(broker) -> list[tuple[int, int]]:
    with RawClient(broker) as raw:
        response = raw.request(API_VERSIONS, 3, catalogue(API_VERSIONS, 3, b""))
    assert response.error_code == ErrorCode.none
    return [(k.api_key, v) for k in response.api_keys for v in range(k.min_version, k.max_version + 1)]


def test_every_advertised_api_has_a_catalogue_request(every_broker):
    keys = {key for key, _ in advertised(every_broker)}
    for key in keys:
        catalogue(key, 0, b"")  # a KeyError names an API the catalogue lacks


def test_every_advertised_version_answers_a_real_request(every_broker):
    records = bytes(record_batch([b"every-version"]))
    failures = []
    with RawClient(every_broker) as raw:
        for api_key, version in advertised(every_broker):
            what = f"{api_name(api_key)} v{version}"
            if api_key == PRODUCE and version < 3:  # no kio schema: message sets of magic 0/1
                raw._correlation += 1
                message_set = legacy_message_set(version // 2, 0, [(None, b"legacy", 1_700_000_000_000)])
                raw.send_raw(legacy_produce_request(version, raw._correlation, TOPIC, message_set))
                payload = raw.read_frame()
                assert payload is not None, f"{what}: connection closed\n{raw.broker_log_about_me()}"
                assert int.from_bytes(payload[:4], "big") == raw._correlation, what
                assert parse_produce_response(version, payload)[3] == 0, what
                continue
            body = catalogue(api_key, version, records)
            request_class(api_key, version)  # the version has a kio schema
            correlation = raw.send(api_key, version, body)
            payload = raw.read_frame()
            if payload is None:
                failures.append(f"{what}: connection closed\n{raw.broker_log_about_me()}")
                raw = RawClient(every_broker)
                continue
            problem = response_problem(api_key, version, correlation, payload)
            if problem:
                failures.append(f"{what}: {problem}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("version", range(4, 13))
def test_fetch_returns_the_records_at_every_version(every_broker, version):
    """Fetch v4-v8 lack current_leader_epoch; the handler once read it and closed the connection."""
    with RawClient(every_broker) as raw:
        produced = raw.request(PRODUCE, 9, produce_body(TOPIC, 1, record_batch([f"fetch-v{version}".encode()])))
        offset = produced.responses[0].partition_responses[0].base_offset
        body = catalogue(1, version, b"")
        body["topics"][0]["partitions"][0].update(partition=1, fetch_offset=offset)
        response = raw.request(1, version, body)
    (part,) = response.responses[0].partitions
    assert part.error_code == ErrorCode.none
    values = [r.value for batch in decode_batches(part.records) for r in batch]
    assert values == [f"fetch-v{version}".encode()]


def response_problem(api_key: int, version: int, correlation: int, payload: bytes) -> str | None:
    """Why ``payload`` is not a well-formed response of this version, or None.

    The body must follow the version's schema to its last byte, and kio must decode it;
    except that kio cannot read a -1 timestamp, which Kafka itself sends as
    DescribeTransactions' start time of a transaction that is not ongoing."""
    view = memoryview(payload).toreadonly()
    got = int.from_bytes(view[:4], "big", signed=True)
    if got != correlation:
        return f"correlation id {got}, expected {correlation}"
    pos = 4
    if api_key != API_VERSIONS and is_flexible(api_key, version):
        pos = skip_tagged_fields(view, pos)
    try:
        end = wellformed.check(response_class(api_key, version), view, pos)
    except wellformed.MalformedMessage as exc:
        return f"malformed response: {exc}"
    if end != len(payload):
        return f"{len(payload) - end} bytes after the end of the response"
    try:
        decode_response(api_key, version, payload)
    except MalformedResponse as exc:
        if not (api_key == DESCRIBE_TRANSACTIONS and "negative timestamp" in str(exc)):
            return str(exc)
    return None
