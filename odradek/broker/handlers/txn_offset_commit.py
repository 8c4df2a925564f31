"""TxnOffsetCommit (key 28), v0-v4: a group's offsets as part of a producer's transaction.

The offsets are written to the group's ``__consumer_offsets`` partition as a
transactional batch of the producer (GroupCoordinator.commit_transactional_offsets) and
become the group's committed offsets only when the transaction's COMMIT marker lands
there; an ABORT drops them. Until then OffsetFetch with ``require_stable`` answers
UNSTABLE_OFFSET_COMMIT for those partitions. Checks: the producer is the transaction's
current one and AddOffsetsToTxn put the group's partition into its open transaction
(INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE; when
``transaction.partition.verification.enable``), the member and generation when given
(v3+: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID), the partition exists
(UNKNOWN_TOPIC_OR_PARTITION), metadata size (OFFSET_METADATA_TOO_LARGE). v5
(transactions v2) is not advertised. In a cluster the answer waits until the group's
``__consumer_offsets`` partition has the offsets in its ISR (``offsets.commit.timeout.ms``;
COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR otherwise), as OffsetCommit does; offsets
that do not reach it are no longer pending, and the COMMIT marker's offsets are fetched
only once the marker is in the ISR too (``OffsetManager``).
"""

from odradek.broker.group.group_handler_support import answer_later
from odradek.broker.group.group_handler_support import coordinator_of as group_coordinator_of
from odradek.broker.group.offset_and_metadata import OffsetAndMetadata
from odradek.broker.group.partitioning import OFFSETS_TOPIC
from odradek.broker.handlers import api
from odradek.broker.txn.txn_handler_support import coordinator_of
from odradek.protocol import errors, messages
from odradek.protocol.errors import ErrorCode


def _request_denied(broker, request) -> int:
    """Kafka's whole-request checks: Write on the transactional id, Read on the group."""
    body = request.body
    if not broker.allowed(request, "Write", "TransactionalId", body.transactional_id):
        return int(ErrorCode.transactional_id_authorization_failed)
    if not broker.allowed(request, "Read", "Group", body.group_id):
        return int(ErrorCode.group_authorization_failed)
    return 0


@api(28, 0, 4)
def handle_txn_offset_commit(broker, request):
    body = request.body
    image = broker.image
    items = []  # (topic, partition) in request order
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    codes: dict[tuple[str, int], int] = {}
    denied = _request_denied(broker, request)
    for t in body.topics:
        info = image.topics.get(t.name)
        topic_denied = denied or (
            broker.authorizer is not None and not broker.allowed(request, "Read", "Topic", t.name) and ErrorCode.topic_authorization_failed
        )
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            items.append(tp)
            if topic_denied:
                codes[tp] = int(topic_denied)
                continue
            if info is None or p.partition_index not in info.partitions:
                codes[tp] = int(ErrorCode.unknown_topic_or_partition)
                continue
            offsets[tp] = OffsetAndMetadata(
                p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata
            )
    if offsets:

        def commit(settled) -> None:
            try:
                groups = group_coordinator_of(broker)
                partition = groups.partition_of(body.group_id)
                check = int(ErrorCode.none)
                if partition is not None and getattr(broker, "transaction_coordinator", None) is not None:
                    check = coordinator_of(broker).check_offset_commit(
                        body.transactional_id, body.producer_id, body.producer_epoch, (OFFSETS_TOPIC, partition)
                    )
                if check:
                    codes.update(dict.fromkeys(offsets, check))
                    settled(0)
                    return
                results = groups.commit_transactional_offsets(
                    body.group_id,
                    body.producer_id,
                    body.producer_epoch,
                    getattr(body, "member_id", "") or "",
                    getattr(body, "group_instance_id", None),
                    getattr(body, "generation_id", -1),
                    offsets,
                    settled,
                )
            except errors.KafkaError as exc:
                results = dict.fromkeys(offsets, int(exc.code))
                settled(0)
            codes.update(results)

        return answer_later(commit, lambda failed: _response(request.api_version, items, codes, failed))
    return _response(request.api_version, items, codes, 0)


def _response(version: int, items, codes: dict, failed: int):
    """The answer; with ``failed`` (the offsets did not reach the ISR) in place of successes."""
    topics: dict = {}
    for topic, partition in items:
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "error_code": codes[(topic, partition)] or failed}
        )
    return messages.build_response(
        28,
        version,
        {"throttle_time": 0, "topics": [{"name": t, "partitions": parts} for t, parts in topics.items()]},
    )
