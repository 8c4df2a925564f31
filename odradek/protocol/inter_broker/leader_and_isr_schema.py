"""LeaderAndIsr (API key 4) v7, as a Kafka 3.4+ ZooKeeper-mode controller sends it.

The controller tells a broker which partitions it leads and follows: per partition the
leader, leader epoch, ISR, partition (znode) version and replicas. v5 added topic ids and
the request type (full or incremental), v6 the leader recovery state of KIP-704, v7 the
KRaft-controller flag of the ZooKeeper-to-KRaft migration (KIP-866), always false here.
"""

import uuid

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32, i64

from odradek.protocol.inter_broker._schema import field, request, response

API_KEY = 4
VERSION = 7

TYPE_INCREMENTAL = 0
TYPE_FULL = 1


@request(API_KEY, VERSION, nested=True)
class LeaderAndIsrPartitionState:
    partition_index: i32 = field("int32")
    controller_epoch: i32 = field("int32")
    leader: i32 = field("int32")
    leader_epoch: i32 = field("int32")
    isr: tuple[i32, ...] = field("int32")
    partition_epoch: i32 = field("int32")
    """The version of the partition's state znode (Kafka's ZkVersion)."""
    replicas: tuple[i32, ...] = field("int32")
    adding_replicas: tuple[i32, ...] = field("int32", default=())
    removing_replicas: tuple[i32, ...] = field("int32", default=())
    is_new: bool = field("bool", default=False)
    leader_recovery_state: i8 = field("int8", default=i8(0))
    """0: recovered; 1: recovering (the leader was chosen by unclean election)."""


@request(API_KEY, VERSION, nested=True)
class LeaderAndIsrTopicState:
    topic_name: str = field("string")
    topic_id: uuid.UUID | None = field("uuid", default=None)
    partition_states: tuple[LeaderAndIsrPartitionState, ...]


@request(API_KEY, VERSION, nested=True)
class LeaderAndIsrLiveLeader:
    broker_id: i32 = field("int32")
    host_name: str = field("string")
    port: i32 = field("int32")


@request(API_KEY, VERSION)
class LeaderAndIsrRequest:
    controller_id: i32 = field("int32")
    is_k_raft_controller: bool = field("bool", default=False)
    """True only from a KRaft controller during a ZooKeeper migration (KIP-866); ours: False."""
    controller_epoch: i32 = field("int32")
    broker_epoch: i64 = field("int64", default=i64(-1))
    type: i8 = field("int8", default=i8(TYPE_INCREMENTAL))
    topic_states: tuple[LeaderAndIsrTopicState, ...]
    live_leaders: tuple[LeaderAndIsrLiveLeader, ...]


@response(API_KEY, VERSION, nested=True)
class LeaderAndIsrPartitionError:
    partition_index: i32 = field("int32")
    error_code: ErrorCode = field("error_code")


@response(API_KEY, VERSION, nested=True)
class LeaderAndIsrTopicError:
    topic_id: uuid.UUID | None = field("uuid", default=None)
    partition_errors: tuple[LeaderAndIsrPartitionError, ...]


@response(API_KEY, VERSION)
class LeaderAndIsrResponse:
    error_code: ErrorCode = field("error_code")
    topics: tuple[LeaderAndIsrTopicError, ...]
