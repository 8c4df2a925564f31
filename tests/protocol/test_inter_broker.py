"""The inter-broker control APIs kio lacks (odradek/protocol/inter_broker): LeaderAndIsr,
StopReplica, UpdateMetadata, ControlledShutdown, through the same framing, well-formedness
check and kio reader as every other API."""

from __future__ import annotations

import random
import uuid

import pytest
from kio.schema.errors import ErrorCode
from kio_samples import sample

from odradek.protocol import messages
from odradek.protocol.inter_broker import SCHEMAS
from odradek.protocol.inter_broker.controlled_shutdown_schema import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from odradek.protocol.inter_broker.leader_and_isr_schema import (
    LeaderAndIsrLiveLeader,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
)
from odradek.protocol.inter_broker.update_metadata_schema import (
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicState,
)


def decode_request(frame: bytes):
    payload = frame[4:]
    header, pos = messages.parse_request_header(payload)
    return header, messages.decode_request_body(header, payload, pos)


def test_names_and_versions_are_kafka_3_9_zookeeper_modes():
    assert {key: (name, version) for key, (name, version, *_) in SCHEMAS.items()} == {
        4: ("leader_and_isr", 7),
        5: ("stop_replica", 4),
        6: ("update_metadata", 8),
        7: ("controlled_shutdown", 3),
    }
    for key in SCHEMAS:
        assert messages.known_versions(key) == range(SCHEMAS[key][1], SCHEMAS[key][1] + 1)
        assert messages.is_flexible(key, SCHEMAS[key][1])
    assert messages.api_name(4) == "leader_and_isr"


def test_leader_and_isr_round_trips_through_a_request_frame():
    topic_id = uuid.uuid4()
    request = LeaderAndIsrRequest(
        controller_id=2,
        controller_epoch=7,
        broker_epoch=4294967311,
        topic_states=(
            LeaderAndIsrTopicState(
                topic_name="orders",
                topic_id=topic_id,
                partition_states=(
                    LeaderAndIsrPartitionState(
                        partition_index=0,
                        controller_epoch=7,
                        leader=1,
                        leader_epoch=3,
                        isr=(1, 2),
                        partition_epoch=5,
                        replicas=(1, 2, 3),
                        is_new=True,
                    ),
                ),
            ),
        ),
        live_leaders=(LeaderAndIsrLiveLeader(broker_id=1, host_name="127.0.0.1", port=9093),),
    )
    header, decoded = decode_request(messages.encode_request(4, 7, 11, "controller-2", request))
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (4, 7, 11, "controller-2")
    assert decoded == request
    assert decoded.topic_states[0].partition_states[0].leader_recovery_state == 0


def test_update_metadata_round_trips_with_offline_replicas_and_racks():
    request = UpdateMetadataRequest(
        controller_id=1,
        controller_epoch=2,
        topic_states=(
            UpdateMetadataTopicState(
                topic_name="t",
                partition_states=(
                    UpdateMetadataPartitionState(
                        partition_index=3, controller_epoch=2, leader=-1, leader_epoch=9,
                        isr=(), zk_version=4, replicas=(2, 3), offline_replicas=(2, 3),
                    ),
                ),
            ),
        ),
        live_brokers=(
            UpdateMetadataBroker(
                id=1,
                endpoints=(UpdateMetadataEndpoint(port=9093, host="h1", listener="PLAINTEXT", security_protocol=0),),
                rack="rack-a",
            ),
        ),
    )
    _, decoded = decode_request(messages.encode_request(6, 8, 1, None, request))
    assert decoded == request


def test_controlled_shutdown_bytes_are_kafkas_layout():
    """v3 request body: broker id int32, broker epoch int64, empty tagged fields."""
    body = messages.encode_body(ControlledShutdownRequest(broker_id=3, broker_epoch=258))
    assert body == bytes.fromhex("00000003" "0000000000000102" "00")
    response = ControlledShutdownResponse(error_code=ErrorCode.none, remaining_partitions=())
    frame = messages.encode_response(7, 3, 42, response)
    # size, correlation id, header tags, error code 0, compact array of 0 (varint 1), body tags
    assert frame == bytes.fromhex("00000009" "0000002a" "00" "0000" "01" "00")
    assert messages.decode_response(7, 3, frame[4:]) == (42, response)


@pytest.mark.parametrize("api_key", sorted(SCHEMAS))
def test_random_messages_round_trip(api_key):
    rng = random.Random(api_key)
    version = SCHEMAS[api_key][1]
    for _ in range(20):
        request = sample(messages.request_class(api_key, version), rng)
        assert decode_request(messages.encode_request(api_key, version, 5, "c", request))[1] == request
        response = sample(messages.response_class(api_key, version), rng)
        frame = messages.encode_response(api_key, version, 6, response)
        assert messages.decode_response(api_key, version, frame[4:]) == (6, response)


def test_hostile_array_length_is_malformed_not_an_abort():
    # LeaderAndIsr v7 body: controller id, kraft flag, epoch, broker epoch, type, then a
    # compact array claiming 2**32 topics in a 21-byte frame.
    body = bytes.fromhex("00000001" "00" "00000001" "ffffffffffffffff" "00") + b"\xff\xff\xff\xff\x0f"
    head = bytes.fromhex("0004" "0007" "00000001" "ffff" "00")
    with pytest.raises(messages.MalformedRequest, match="runs past the end of the frame"):
        decode_request(messages.frame(head, body))


def test_other_versions_are_unknown():
    with pytest.raises(KeyError, match="only v7"):
        messages.request_class(4, 6)
