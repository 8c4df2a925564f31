"""Produce (key 0), v3-v11.

Record batches stay bytes: each partition's batches are validated, given offsets and
appended by the log (see ``storage.log.Log.append_as_leader``). acks=0 sends no answer
(and closes the connection if any partition failed, so the client notices, as Kafka
does); acks=1 and acks=-1 answer once the append is done — on a single node the ISR is
this broker, so the high watermark has already passed the batch. Writes to internal
topics are refused. The response is packed by hand (``protocol.hot_responses``).
Transactional produce (transactional_id) belongs to the transactions work and is not
advertised yet.
"""

from odradek.broker.handlers import RawResponse, api
from odradek.protocol import errors
from odradek.protocol.errors import ErrorCode
from odradek.protocol.hot_responses import produce_response


@api(0, 3, 11)
def handle_produce(broker, request):
    body = request.body
    acks = body.acks
    if acks not in (-1, 0, 1):
        results = [
            (t.name, [(p.index, ErrorCode.invalid_required_acks, -1, -1, -1, None) for p in t.partition_data])
            for t in body.topic_data
        ]
        return RawResponse(produce_response(request.api_version, results))
    replicas = broker.replica_manager
    image_topics = broker.image.topics
    results = []
    failed = None
    for topic in body.topic_data:
        name = topic.name
        info_topic = image_topics.get(name)
        partitions = []
        for pdata in topic.partition_data:
            index = pdata.index
            try:
                if info_topic is None:
                    raise errors.UnknownTopicOrPartitionError(f"unknown topic {name}")
                if info_topic.internal:
                    raise errors.InvalidTopicExceptionError(f"{name} is an internal topic")
                if pdata.records is None:
                    raise errors.CorruptMessageError("null record set")
                partition, info = replicas.append(name, index, pdata.records, acks)
                partitions.append(
                    (index, 0, info.first_offset, info.log_append_time, info.log_start_offset, None)
                )
            except errors.KafkaError as exc:
                failed = exc
                partitions.append((index, exc.code, -1, -1, -1, exc.message))
        results.append((name, partitions))
    if acks == 0:
        if failed is not None:
            raise failed  # the connection is closed: the only signal an acks=0 producer gets
        return None
    return RawResponse(produce_response(request.api_version, results))
