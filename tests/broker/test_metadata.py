"""Metadata as clients see it: advertised listeners, the broker's partition default for
auto-created topics, auto-creation switched off, and ApiVersions matching what works."""

from __future__ import annotations

from broker_e2e import RawClient, admin, produce_and_flush, producer
from confluent_kafka import KafkaError
from confluent_kafka.admin import NewTopic
from kio.schema.errors import ErrorCode
from support import wait_until

from odradek.testing.process import BrokerProcess, free_port

METADATA = 3


def metadata(raw: RawClient, topics, auto_create: bool):
    body = {
        "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
        "allow_auto_topic_creation": auto_create,
        "include_topic_authorized_operations": False,
    }
    return raw.request(METADATA, 12, body)


def test_advertised_listener_and_num_partitions(tmp_path, topic_name):
    port = free_port()
    overrides = {"advertised.listeners": f"PLAINTEXT://localhost:{port}", "num.partitions": 3}
    with BrokerProcess(tmp_path / "data", port=port, overrides=overrides) as b:
        with RawClient(b) as raw:
            response = metadata(raw, [topic_name], auto_create=True)
        assert [(n.node_id, n.host, n.port) for n in response.brokers] == [(0, "localhost", port)]
        assert response.controller_id == 0
        assert response.cluster_id
        (topic,) = response.topics
        assert topic.error_code in (ErrorCode.none, ErrorCode.leader_not_available)
        # A real client dials the advertised name and can use the auto-created topic.
        prod = producer(b, linger_ms=0)
        deliveries = produce_and_flush(prod, topic_name, [{"value": b"v", "partition": 2}])
        assert deliveries.acked[0].partition == 2
        meta = admin(b).list_topics(topic_name, timeout=10).topics[topic_name]
        assert sorted(meta.partitions) == [0, 1, 2]


def test_auto_create_disabled(own_broker, topic_name):
    b = own_broker(**{"auto.create.topics.enable": "false"})
    with RawClient(b) as raw:
        for auto in (True, False):
            (topic,) = metadata(raw, [topic_name], auto_create=auto).topics
            assert topic.error_code == ErrorCode.unknown_topic_or_partition
        assert [t.name for t in metadata(raw, None, auto_create=True).topics if t.name == topic_name] == []
    errors = []
    prod = producer(b, linger_ms=0, message_timeout_ms=1000)
    prod.produce(topic_name, b"v", on_delivery=lambda err, msg: errors.append(err))
    prod.flush(10)
    assert [e.code() for e in errors] in ([KafkaError.UNKNOWN_TOPIC_OR_PART], [KafkaError._MSG_TIMED_OUT])


def test_metadata_lists_created_topics_and_partition_leaders(broker, topic_name):
    client = admin(broker)
    client.create_topics([NewTopic(topic_name, 4, 1)])[topic_name].result(timeout=15)
    with RawClient(broker) as raw:
        response = wait_until(
            lambda: (r := metadata(raw, [topic_name], auto_create=False)).topics[0].error_code == 0 and r,
            message="the new topic in metadata",
        )
    (topic,) = response.topics
    assert topic.topic_id is not None and str(topic.topic_id) != "00000000-0000-0000-0000-000000000000"
    assert sorted(p.partition_index for p in topic.partitions) == [0, 1, 2, 3]
    for p in topic.partitions:
        assert (p.error_code, p.leader_id, p.leader_epoch) == (ErrorCode.none, 0, 0)
        assert list(p.replica_nodes) == [0] and list(p.isr_nodes) == [0]
