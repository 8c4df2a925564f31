"""StopReplica (API key 5) v4 (v3 plus KIP-866's KRaft-controller flag): the controller tells a broker to stop (and maybe delete)
replicas — after a reassignment moved them away, on topic deletion, or to stop a follower
of a broker that is shutting down. v3 carries a leader epoch and a delete flag per partition.
"""

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from odradek.protocol.inter_broker._schema import field, request, response

API_KEY = 5
VERSION = 4

# Kafka's sentinels for StopReplicaPartitionState.leader_epoch
NO_EPOCH = -1  # the controller has no epoch for this partition: stop regardless
EPOCH_DURING_DELETE = -2  # topic deletion: stop regardless of the local epoch


@request(API_KEY, VERSION, nested=True)
class StopReplicaPartitionState:
    partition_index: i32 = field("int32")
    leader_epoch: i32 = field("int32", default=i32(NO_EPOCH))
    delete_partition: bool = field("bool")


@request(API_KEY, VERSION, nested=True)
class StopReplicaTopicState:
    topic_name: str = field("string")
    partition_states: tuple[StopReplicaPartitionState, ...]


@request(API_KEY, VERSION)
class StopReplicaRequest:
    controller_id: i32 = field("int32")
    is_k_raft_controller: bool = field("bool", default=False)
    """True only from a KRaft controller during a ZooKeeper migration (KIP-866); ours: False."""
    controller_epoch: i32 = field("int32")
    broker_epoch: i64 = field("int64", default=i64(-1))
    topic_states: tuple[StopReplicaTopicState, ...]


@response(API_KEY, VERSION, nested=True)
class StopReplicaPartitionError:
    topic_name: str = field("string")
    partition_index: i32 = field("int32")
    error_code: ErrorCode = field("error_code")


@response(API_KEY, VERSION)
class StopReplicaResponse:
    error_code: ErrorCode = field("error_code")
    partition_errors: tuple[StopReplicaPartitionError, ...]
