"""The share coordinator's APIs (KIP-932), sent by share-partition leaders to the leader of a
key's ``__share_group_state`` partition (``broker/share/share_coordinator.py``):
InitializeShareGroupState (key 83) v0, ReadShareGroupState (84) v0, WriteShareGroupState
(85) v0-v1, DeleteShareGroupState (86) v0, ReadShareGroupStateSummary (87) v0-v1.

Inter-broker APIs: ClusterAction on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every
partition (Kafka). Per partition: NOT_COORDINATOR where this broker does not lead the key's
state partition, COORDINATOR_NOT_AVAILABLE before ``__share_group_state`` exists or when a
write did not reach the ISR in ``share.coordinator.write.timeout.ms``, FENCED_LEADER_EPOCH,
FENCED_STATE_EPOCH, INVALID_REQUEST for a null topic id or a negative partition,
UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata does not have (but a delete). Writes are
answered once replicated; ``delivery_complete_count`` (v1) is not kept (-1).
"""

from odradek.broker.handlers import api
from odradek.broker.share.share_group_state_api import DELETE, INITIALIZE, READ, SUMMARY, WRITE
from odradek.protocol import errors, messages


def _coordinator(broker):
    coordinator = getattr(broker, "share_coordinator", None)
    if coordinator is None:
        raise errors.CoordinatorNotAvailableError("share groups are not enabled on this broker")
    return coordinator


def _key(broker, group_id, topic_id, partition: int, known: bool):
    if topic_id is None:
        raise errors.InvalidRequestError("the topic id must not be null")
    if partition < 0:
        raise errors.InvalidRequestError("the partition must not be negative")
    if known:
        info = broker.image.topic_by_id(topic_id)
        if info is None or partition not in info.partitions:
            raise errors.UnknownTopicOrPartitionError(f"no partition {partition} of topic id {topic_id}")
    return (group_id or "", topic_id, partition)


async def _each(broker, request, apply, row, known: bool = True) -> list[dict]:
    """``[{"topic_id", "partitions": [row(partition, code, message, result)]}]``, applying
    ``apply(coordinator, key, p)`` (maybe a coroutine) to every partition in turn; ``known``:
    the partition must exist (UNKNOWN_TOPIC_OR_PARTITION; not for deletes, whose topic may be
    gone)."""
    body = request.body
    allowed = broker.allowed(request, "ClusterAction", "Cluster", "kafka-cluster")
    results = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            code, message, result = 0, None, None
            try:
                if not allowed:
                    raise errors.ClusterAuthorizationFailedError("ClusterAction on the cluster is needed")
                result = apply(_coordinator(broker), _key(broker, body.group_id, t.topic_id, p.partition, known), p)
                if hasattr(result, "__await__"):
                    result = await result
            except errors.KafkaError as exc:
                code, message = int(exc.code), exc.message
            parts.append(row(p.partition, code, message, result))
        results.append({"topic_id": t.topic_id, "partitions": parts})
    return results


def _status(partition: int, code: int, message, _result) -> dict:
    return {"partition": partition, "error_code": code, "error_message": message}


@api(INITIALIZE, 0, 0)
async def handle_initialize_share_group_state(broker, request):
    results = await _each(
        broker, request, lambda c, key, p: c.initialize(key, p.state_epoch, p.start_offset), _status
    )
    return messages.build_response(INITIALIZE, request.api_version, {"results": results})


def _read_row(partition: int, code: int, message, state) -> dict:
    return {
        "partition": partition,
        "error_code": code,
        "error_message": message,
        "state_epoch": state.state_epoch if state else 0,
        "start_offset": state.start_offset if state else -1,
        "state_batches": [
            {"first_offset": a, "last_offset": b, "delivery_state": s, "delivery_count": n}
            for a, b, s, n in (state.batches if state else ())
        ],
    }


@api(READ, 0, 0)
async def handle_read_share_group_state(broker, request):
    results = await _each(broker, request, lambda c, key, p: c.read(key, p.leader_epoch), _read_row)
    return messages.build_response(READ, request.api_version, {"results": results})


def _write(coordinator, key, p):
    batches = [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches]
    return coordinator.write(key, p.state_epoch, p.leader_epoch, p.start_offset, batches)


@api(WRITE, 0, 1)
async def handle_write_share_group_state(broker, request):
    results = await _each(broker, request, _write, _status)
    return messages.build_response(WRITE, request.api_version, {"results": results})


@api(DELETE, 0, 0)
async def handle_delete_share_group_state(broker, request):
    results = await _each(broker, request, lambda c, key, p: c.delete(key), _status, known=False)
    return messages.build_response(DELETE, request.api_version, {"results": results})


def _summary_row(partition: int, code: int, message, state) -> dict:
    return {
        "partition": partition,
        "error_code": code,
        "error_message": message,
        "state_epoch": state.state_epoch if state else 0,
        "leader_epoch": state.leader_epoch if state else -1,
        "start_offset": state.start_offset if state else -1,
        "delivery_complete_count": -1,
    }


@api(SUMMARY, 0, 1)
async def handle_read_share_group_state_summary(broker, request):
    results = await _each(
        broker, request, lambda c, key, p: c.read(key, p.leader_epoch, summary=True), _summary_row
    )
    return messages.build_response(SUMMARY, request.api_version, {"results": results})


