"""DescribeProducers (key 61), v0: the active idempotent and transactional producers of partitions.

For each partition this broker leads: every producer id its producer state still holds (not
yet expired after ``producer.id.expiration.ms``), with its epoch, last sequence, last batch
timestamp, coordinator epoch and the first offset of its open transaction (-1 if none), as
``kafka-transactions.sh describe-producers`` shows them. UNKNOWN_TOPIC_OR_PARTITION for a
partition that does not exist, NOT_LEADER_OR_FOLLOWER for one led by another broker.
"""

from odradek.broker.handlers import api
from odradek.protocol import errors, messages


def _producers(partition) -> list[dict]:
    return [
        {
            "producer_id": entry.producer_id,
            "producer_epoch": entry.epoch,
            "last_sequence": entry.last_seq,
            "last_timestamp": entry.last_timestamp,
            "coordinator_epoch": entry.coordinator_epoch,
            "current_txn_start_offset": entry.current_txn_first_offset,
        }
        for entry in sorted(partition.log.producer_state.producers.values(), key=lambda e: e.producer_id)
    ]


@api(61, 0, 0)
def handle_describe_producers(broker, request):
    topics = []
    for topic in request.body.topics:
        partitions = []
        allowed = broker.allowed(request, "Read", "Topic", topic.name)
        for index in topic.partition_indexes:
            entry = {"partition_index": index, "error_code": 0, "error_message": None, "active_producers": []}
            try:
                if not allowed:
                    raise errors.TopicAuthorizationFailedError(f"not authorized to read topic {topic.name}")
                partition = broker.replica_manager.get_partition(topic.name, index)
                partition.check_leader()
                entry["active_producers"] = _producers(partition)
            except errors.KafkaError as exc:
                entry.update(error_code=exc.code, error_message=exc.message)
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return messages.build_response(61, request.api_version, {"throttle_time": 0, "topics": topics})
