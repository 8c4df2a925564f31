"""Produce (key 0), v0-v13.

Record batches stay bytes: each partition's batches are validated, given offsets and
appended by the log (see ``storage.log.Log.append_as_leader``). acks=0 sends no answer
(and closes the connection if any partition failed, so the client notices, as Kafka
does); acks=1 answers once the append is done; acks=-1 too when the ISR is this broker
alone (a single node), else it waits in the produce purgatory (``DelayedProduce``) until
the high watermark passes the batch or ``timeout_ms`` runs out (REQUEST_TIMED_OUT); an ISR
smaller than ``min.insync.replicas`` refuses it (NOT_ENOUGH_REPLICAS, or
NOT_ENOUGH_REPLICAS_AFTER_APPEND when it shrank while waiting). Writes to internal
topics are refused. The response is packed by hand (``protocol.hot_responses``).
v0-v2 carry legacy message sets (magic 0/1), converted to v2 batches before the append.
A batch rejected for some of its records (keyless records on a compacted topic, out-of-range
timestamps) is refused whole, nothing appended, with INVALID_RECORD or INVALID_TIMESTAMP,
``error_message`` and, v8+, ``record_errors`` listing each bad record's index and why (KIP-467).
Transactional batches (v3+ with a transactional id) are checked against the transaction
coordinator first (``transaction.partition.verification.enable``, KIP-890): the partition
must be in the producer's open transaction (INVALID_TXN_STATE) and its epoch current
(INVALID_PRODUCER_EPOCH), so a fenced producer cannot leave data no marker will decide.
With an authorizer, Write on each topic (else TOPIC_AUTHORIZATION_FAILED) and on the
transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED) is checked; the fast lane
serves a topic only when the connection's cached decision says its principal may Write it.
v12 is v11 (its transactions-v2 meaning, partitions added to the transaction implicitly,
needs the ``transaction.version`` feature, which Odradek does not advertise, so clients
still add partitions first); v13 names topics by id (KIP-516), answered by id, an unknown
id UNKNOWN_TOPIC_ID.
"""

from odradek.broker.delayed_produce import wait_for_isr
from odradek.broker.handlers import RawResponse, api, fast_lane
from odradek.protocol import errors, messages
from odradek.protocol.batch import (
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    MAGIC_OFFSET,
    TRANSACTIONAL_BIT,
    read_header,
)
from odradek.protocol.errors import ErrorCode
from odradek.protocol.hot_responses import one_partition_produce_frame, produce_response, produce_throttle_at
from odradek.protocol.legacy_records import convert_legacy_to_v2
from odradek.protocol.produce_request import TOPIC_IDS_FROM, parse_single_partition


@api(0, 0, 13)
def handle_produce(broker, request):
    body = request.body
    acks = body.acks
    by_id = request.api_version >= TOPIC_IDS_FROM
    if acks not in (-1, 0, 1):
        results = [
            (_key(t, by_id), [(p.index, ErrorCode.invalid_required_acks, -1, -1, -1, None) for p in t.partition_data])
            for t in body.topic_data
        ]
        return _response(request.api_version, results)
    replicas = broker.replica_manager
    image_topics = broker.image.topics
    txn_id = getattr(body, "transactional_id", None)
    txn = getattr(broker, "transaction_coordinator", None) if txn_id is not None else None
    results = []
    failed = None
    checked = broker.authorizer is not None
    if checked and txn_id is not None and not broker.allowed(request, "Write", "TransactionalId", txn_id):
        results = [
            (
                _key(t, by_id),
                [(p.index, ErrorCode.transactional_id_authorization_failed, -1, -1, -1, None) for p in t.partition_data],
            )
            for t in body.topic_data
        ]
        return _response(request.api_version, results)
    waiting = []  # acks=all partitions whose records have not reached the ISR yet
    for topic in body.topic_data:
        if by_id:
            info_topic = broker.image.topic_by_id(topic.topic_id) if topic.topic_id is not None else None
            name = info_topic.name if info_topic is not None else ""
        else:
            name = topic.name
            info_topic = image_topics.get(name)
        denied = info_topic is not None and checked and not broker.allowed(request, "Write", "Topic", name)
        partitions = []
        for pdata in topic.partition_data:
            index = pdata.index
            try:
                if by_id and info_topic is None:
                    raise errors.UnknownTopicIdError(f"unknown topic id {topic.topic_id}")
                if denied:
                    raise errors.TopicAuthorizationFailedError(f"not authorized to write to {name}")
                if info_topic is None:
                    raise errors.UnknownTopicOrPartitionError(f"unknown topic {name}")
                if info_topic.internal:
                    raise errors.InvalidTopicExceptionError(f"{name} is an internal topic")
                records = pdata.records
                if records is None:
                    raise errors.CorruptMessageError("null record set")
                if request.api_version < 3:
                    records = _to_v2(records)
                elif txn is not None:
                    _verify_transactional(txn, txn_id, records, (name, index))
                partition, info = replicas.append(name, index, records, acks)
                partitions.append(
                    (index, 0, info.first_offset, info.log_append_time, info.log_start_offset, None)
                )
                if acks == -1 and partition.high_watermark <= info.last_offset:
                    waiting.append((partition, info.last_offset + 1, _failer(partitions, len(partitions) - 1)))
            except errors.KafkaError as exc:
                failed = exc
                partitions.append(_failure(index, exc))
        results.append((_key(topic, by_id), partitions))
    throttle_ms = 0
    if broker.client_quotas.active:
        size = sum(len(p.records or b"") for t in body.topic_data for p in t.partition_data)
        throttle_ms = broker.client_quotas.record("producer_byte_rate", request.principal, request.client_id, size)
        if throttle_ms:
            request.extra["throttle_ms"] = throttle_ms  # the connection is muted that long
    if acks == 0:
        if failed is not None:
            raise failed  # the connection is closed: the only signal an acks=0 producer gets
        return None
    if waiting:
        return _wait_for_isr(
            broker, request.api_version, results, waiting, int(body.timeout.total_seconds() * 1000), throttle_ms
        )
    return _response(request.api_version, results, throttle_ms)


def _key(topic, by_id: bool):
    """How the response names a topic: as the request did (its id from v13)."""
    return topic.topic_id if by_id else topic.name


def _response(version: int, results, throttle_ms: int = 0) -> RawResponse:
    return RawResponse(produce_response(version, results, throttle_ms), throttle_at=produce_throttle_at(version))


async def _wait_for_isr(broker, version: int, results, waiting, timeout_ms: int, throttle_ms: int = 0):
    await wait_for_isr(broker.produce_purgatory, timeout_ms, waiting)
    return _response(version, results, throttle_ms)


def _failer(partitions: list, slot: int):
    """Turns the partition's result at ``slot`` into a failure with the given code."""

    def fail(code: int) -> None:
        partitions[slot] = (partitions[slot][0], code, -1, -1, -1, None, None)

    return fail


@fast_lane(0)
def produce_one_partition(broker, frame, may_write=None):
    """The fast lane: a v3-v12 request with no transactional id writing one partition of a
    known, non-internal topic, the shape of every request a client sends at linger.ms=0.
    The same append as above, minus the request objects; the answer is packed from a
    cached template. Anything else is declined (None) for ``handle_produce``."""
    request = parse_single_partition(frame)
    if request is None:
        return None
    version, correlation_id, acks, name, index, records = request
    topic = broker.image.topics.get(name)
    if topic is None or topic.internal or acks not in (-1, 0, 1):
        return None
    if may_write is not None and not may_write(name):
        return None
    if acks == -1:
        partition = broker.replica_manager.partitions.get((name, index))
        if partition is not None and len(partition.state.isr) > 1:
            return None  # replicated: it may have to wait for the ISR (handle_produce)
    try:
        _, info = broker.replica_manager.append(name, index, records, acks)
    except errors.KafkaError as exc:
        if acks == 0:
            raise
        results = [(name, [_failure(index, exc)])]
        body = produce_response(version, results)[0]
        return messages.response_prefix(0, version, correlation_id, len(body)) + body
    if acks == 0:
        return b""
    return one_partition_produce_frame(
        version, correlation_id, name, index, info.first_offset, info.log_append_time, info.log_start_offset
    )


def _failure(index: int, exc: errors.KafkaError) -> tuple:
    """A partition's failed result; ``record_errors`` names the records that failed a batch
    (KIP-467, v8+) so that the client fails those and can tell the others apart."""
    return (index, exc.code, -1, -1, -1, exc.message, exc.context.get("record_errors"))


def _verify_transactional(txn, txn_id: str, records, tp) -> None:
    """Raise the error a transactional batch gets if it may not be appended to ``tp``."""
    if len(records) < HEADER_SIZE or records[MAGIC_OFFSET] != 2:
        return
    if not (records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_BIT):
        return
    h = read_header(records, 0)
    code = txn.check_produce(txn_id, h.producer_id, h.producer_epoch, tp)
    if code:
        raise errors.error_for(code)(
            f"transactional batch of producer {h.producer_id} (epoch {h.producer_epoch}) refused for "
            f"{tp[0]}-{tp[1]} by transaction {txn_id!r}"
        )


def _to_v2(records: bytes) -> bytes:
    if len(records) > MAGIC_OFFSET and records[MAGIC_OFFSET] < 2:
        try:
            return convert_legacy_to_v2(records)
        except errors.KafkaError:
            raise
        except Exception as exc:
            raise errors.CorruptMessageError(f"malformed legacy message set: {exc}") from exc
    return records
