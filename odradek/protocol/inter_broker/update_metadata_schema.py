"""UpdateMetadata (API key 6) v8: the controller hands every live broker the cluster's
metadata — live brokers with their endpoints and racks, and each partition's leader, epoch,
ISR, replicas and offline replicas — which the broker serves Metadata requests from.
v7 added topic ids, v8 KIP-866's KRaft-controller flag (and a tagged request type, which
kio skips when reading and we never send).
"""

import uuid

from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32, i64

from odradek.protocol.inter_broker._schema import field, request, response

API_KEY = 6
VERSION = 8


@request(API_KEY, VERSION, nested=True)
class UpdateMetadataPartitionState:
    partition_index: i32 = field("int32")
    controller_epoch: i32 = field("int32")
    leader: i32 = field("int32")
    leader_epoch: i32 = field("int32")
    isr: tuple[i32, ...] = field("int32")
    zk_version: i32 = field("int32")
    replicas: tuple[i32, ...] = field("int32")
    offline_replicas: tuple[i32, ...] = field("int32", default=())


@request(API_KEY, VERSION, nested=True)
class UpdateMetadataTopicState:
    topic_name: str = field("string")
    topic_id: uuid.UUID | None = field("uuid", default=None)
    partition_states: tuple[UpdateMetadataPartitionState, ...]


@request(API_KEY, VERSION, nested=True)
class UpdateMetadataEndpoint:
    port: i32 = field("int32")
    host: str = field("string")
    listener: str = field("string")
    security_protocol: i16 = field("int16")
    """Kafka's SecurityProtocol id: 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL."""


@request(API_KEY, VERSION, nested=True)
class UpdateMetadataBroker:
    id: i32 = field("int32")
    endpoints: tuple[UpdateMetadataEndpoint, ...]
    rack: str | None = field("string", default=None)


@request(API_KEY, VERSION)
class UpdateMetadataRequest:
    controller_id: i32 = field("int32")
    is_k_raft_controller: bool = field("bool", default=False)
    """True only from a KRaft controller during a ZooKeeper migration (KIP-866); ours: False."""
    controller_epoch: i32 = field("int32")
    broker_epoch: i64 = field("int64", default=i64(-1))
    topic_states: tuple[UpdateMetadataTopicState, ...]
    live_brokers: tuple[UpdateMetadataBroker, ...]


@response(API_KEY, VERSION)
class UpdateMetadataResponse:
    error_code: ErrorCode = field("error_code")
