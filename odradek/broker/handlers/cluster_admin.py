"""What the cluster-mode admin handlers share (not a handler: registers no API).

In ZooKeeper mode Kafka lets only the active controller change topics (CreateTopics,
DeleteTopics, CreatePartitions, ElectLeaders, partition reassignments); any other broker
answers NOT_CONTROLLER and the client asks the controller that Metadata names.
"""

from __future__ import annotations

from odradek.protocol import errors

DEFAULT_TIMEOUT_S = 30.0


def require_controller(broker) -> None:
    if not broker.cluster.is_active_controller():
        controller = broker.image.controller_id
        raise errors.NotControllerError(
            f"broker {broker.node_id} is not the controller"
            + (f"; broker {controller} is" if controller >= 0 else "; none is elected yet")
        )


def timeout_s(body) -> float:
    """The request's ``timeout`` (a timedelta in kio), or the default; at least 0.1 s."""
    timeout = getattr(body, "timeout", None)
    seconds = timeout.total_seconds() if timeout is not None else DEFAULT_TIMEOUT_S
    return max(seconds, 0.1)


def stale_control_request(broker, body) -> int | None:
    """The error for an UpdateMetadata this broker must refuse (LeaderAndIsr and StopReplica
    check the same in the replica manager):
    STALE_CONTROLLER_EPOCH from a controller older than one already heard from (it lost its
    election: Kafka's fencing), STALE_BROKER_EPOCH when it was meant for an earlier
    registration of this broker. Otherwise None, and the epoch is remembered."""
    replicas = broker.replica_manager  # one controller epoch for all three requests, as Kafka keeps
    if body.controller_epoch < replicas.controller_epoch:
        return errors.ErrorCode.stale_controller_epoch
    if 0 <= body.broker_epoch < replicas.broker_epoch:
        return errors.ErrorCode.stale_broker_epoch
    replicas.controller_epoch = body.controller_epoch
    return None
