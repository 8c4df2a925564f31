"""AddPartitionsToTxn (key 24), v0-v5: partitions join a producer's transaction.

v0-v3 (clients) add one transaction's partitions; v4+ (brokers, KIP-890) carry several
transactions, each either added or, with ``verify_only``, only checked for membership.
A partition that does not exist gets UNKNOWN_TOPIC_OR_PARTITION and the rest of its
transaction OPERATION_NOT_ATTEMPTED (nothing is added); otherwise every partition gets
the transaction coordinator's answer (NOT_COORDINATOR, CONCURRENT_TRANSACTIONS,
INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED — INVALID_PRODUCER_EPOCH before v2, ...).
In a cluster the answer waits until the transactions' ``__transaction_state`` partitions
have their writes in the ISR (else the coordinator error in place of each success).
"""

from odradek.broker.handlers import api
from odradek.broker.txn.txn_handler_support import coordinator_of, fenced_for_version, when_txn_replicated
from odradek.protocol import errors, messages
from odradek.protocol.errors import ErrorCode


def _answer(broker, version: int, tid: str, pid: int, epoch: int, topics, verify_only: bool) -> dict:
    """One transaction's results as ``{topic: {partition: code}}``."""
    image = broker.image
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    codes: dict = {}
    unknown = {
        tp for tp in wanted if tp[0] not in image.topics or tp[1] not in image.topics[tp[0]].partitions
    }
    if unknown:
        codes = {
            tp: int(
                ErrorCode.unknown_topic_or_partition if tp in unknown else ErrorCode.operation_not_attempted
            )
            for tp in wanted
        }
    else:
        try:
            coordinator = coordinator_of(broker)
            if verify_only:
                codes = coordinator.verify_partitions(tid, pid, epoch, wanted)
            else:
                codes = dict.fromkeys(wanted, coordinator.add_partitions(tid, pid, epoch, wanted))
        except errors.KafkaError as exc:
            codes = dict.fromkeys(wanted, int(exc.code))
    out: dict = {}
    for (topic, partition), code in codes.items():
        out.setdefault(topic, {})[partition] = fenced_for_version(code, version, 2)
    return out


def _topic_results(by_topic: dict, failed: int = 0) -> list[dict]:
    """The results of one transaction; ``failed`` (its state did not reach the ISR) in place
    of successes."""
    return [
        {
            "name": topic,
            "results_by_partition": [
                {"partition_index": p, "partition_error_code": code or failed} for p, code in partitions.items()
            ],
        }
        for topic, partitions in by_topic.items()
    ]


def _succeeded(by_topic: dict) -> bool:
    return any(code == 0 for partitions in by_topic.values() for code in partitions.values())


def _denied(broker, request) -> dict:
    """v0-v3 under an authorizer, as Kafka: without Write on the transactional id every
    partition is TRANSACTIONAL_ID_AUTHORIZATION_FAILED; else the partitions of topics it may
    not Write are TOPIC_AUTHORIZATION_FAILED and the others OPERATION_NOT_ATTEMPTED. Empty
    when the request may go ahead."""
    if broker.authorizer is None:
        return {}
    body = request.body
    wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
    if not broker.allowed(request, "Write", "TransactionalId", body.v3_and_below_transactional_id):
        codes = dict.fromkeys(wanted, int(ErrorCode.transactional_id_authorization_failed))
    else:
        refused = {t.name for t in body.v3_and_below_topics if not broker.allowed(request, "Write", "Topic", t.name)}
        if not refused:
            return {}
        codes = {
            tp: int(ErrorCode.topic_authorization_failed if tp[0] in refused else ErrorCode.operation_not_attempted)
            for tp in wanted
        }
    out: dict = {}
    for (topic, partition), code in codes.items():
        out.setdefault(topic, {})[partition] = code
    return out


@api(24, 0, 5)
def handle_add_partitions_to_txn(broker, request):
    body = request.body
    version = request.api_version
    if version <= 3:
        denied = _denied(broker, request)
        if denied:
            return messages.build_response(
                24, version, {"throttle_time": 0, "results_by_topic_v3_and_below": _topic_results(denied)}
            )
        by_topic = _answer(
            broker,
            version,
            body.v3_and_below_transactional_id,
            body.v3_and_below_producer_id,
            body.v3_and_below_producer_epoch,
            body.v3_and_below_topics,
            False,
        )
        written = [body.v3_and_below_transactional_id] if _succeeded(by_topic) else []
        return when_txn_replicated(
            broker,
            written,
            lambda failed: messages.build_response(
                24, version, {"throttle_time": 0, "results_by_topic_v3_and_below": _topic_results(by_topic, failed)}
            ),
        )
    answered = []
    for txn in body.transactions:
        by_topic = _answer(
            broker,
            version,
            txn.transactional_id,
            txn.producer_id,
            txn.producer_epoch,
            txn.topics,
            txn.verify_only,
        )
        answered.append((txn.transactional_id, by_topic))

    def respond(failed: int):
        results = [
            {"transactional_id": tid, "topic_results": _topic_results(by_topic, failed)} for tid, by_topic in answered
        ]
        return messages.build_response(
            24, version, {"throttle_time": 0, "error_code": 0, "results_by_transaction": results}
        )

    return when_txn_replicated(broker, [tid for tid, by_topic in answered if _succeeded(by_topic)], respond)
