"""DescribeProducers (61), DescribeTopicPartitions (75, KIP-966) and ListConfigResources (74,
KIP-1142) through kafka-python's admin client, as its own test suite drives them, against a
real broker; producers are confluent-kafka's (librdkafka)."""

from __future__ import annotations

import pytest
from broker_e2e import RawClient, create_topic, produce_and_flush, producer
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient


@pytest.fixture
def kp_admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    yield client
    client.close()


def test_describe_producers_lists_idempotent_producers(broker, kp_admin, topic_name):
    create_topic(broker, topic_name, 2)
    prod = producer(broker, enable_idempotence=True, linger_ms=0)
    produce_and_flush(prod, topic_name, [{"value": b"v%d" % i, "partition": 0} for i in range(5)])

    states = kp_admin.describe_producers([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)])
    (active,) = states[TopicPartition(topic_name, 0)].active_producers
    assert active.producer_id >= 0 and active.producer_epoch >= 0
    assert active.last_sequence == 4  # five records, sequences 0-4
    assert active.last_timestamp > 0 and active.current_transaction_start_offset == -1
    assert states[TopicPartition(topic_name, 1)].active_producers == []


def test_describe_producers_of_an_unknown_partition_fails(broker, topic_name):
    with RawClient(broker) as raw:
        body = {"topics": [{"name": topic_name, "partition_indexes": [0]}]}
        (part,) = raw.request(61, 0, body).topics[0].partitions
    assert part.error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_describe_topic_partitions_pages_with_its_cursor(broker, kp_admin, topic_name):
    a, b = topic_name + "-a", topic_name + "-b"
    create_topic(broker, a, 3)
    create_topic(broker, b, 2)
    seen = []
    cursor = None
    pages = 0
    while True:
        page = kp_admin.describe_topic_partitions([b, a], response_partition_limit=2, cursor=cursor)
        pages += 1
        for topic in page["topics"]:
            assert topic["error_code"] == 0 and topic["topic_id"] is not None and not topic["is_internal"]
            for p in topic["partitions"]:
                assert (p["leader_id"], p["replica_nodes"], p["isr_nodes"], p["offline_replicas"]) == (
                    0,
                    [0],
                    [0],
                    [],
                )
                assert p["eligible_leader_replicas"] is None
                seen.append((topic["name"], p["partition_index"]))
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [(a, 0), (a, 1), (a, 2), (b, 0), (b, 1)]  # sorted by name, each once
    assert pages == 3


def test_describe_topic_partitions_errors(broker, kp_admin, topic_name):
    create_topic(broker, topic_name, 1)
    page = kp_admin.describe_topic_partitions([topic_name, topic_name + "-missing", "bad/name"])
    codes = {t["name"]: t["error_code"] for t in page["topics"]}
    assert codes == {topic_name: 0, topic_name + "-missing": 3, "bad/name": 17}
    bad_cursor = kp_admin.describe_topic_partitions(
        [topic_name], cursor={"topic_name": "zzz-not-asked", "partition_index": 0}
    )
    assert [t["error_code"] for t in bad_cursor["topics"]] == [42]  # INVALID_REQUEST


def test_list_config_resources_lists_topics_and_brokers(broker, kp_admin, topic_name):
    create_topic(broker, topic_name, 1)
    listed = kp_admin.list_config_resources(["TOPIC", "BROKER"])
    assert topic_name in listed["topic"]
    assert listed["broker"] == ["0"]
    everything = kp_admin.list_config_resources()
    assert topic_name in everything["topic"] and everything["broker"] == ["0"]
    with RawClient(broker) as raw:
        assert raw.request(74, 1, {"resource_types": [32]}).error_code == 35  # groups: UNSUPPORTED_VERSION
        old = raw.request(74, 0, {})
    assert (old.error_code, old.config_resources) == (0, ())  # v0: client-metrics subscriptions, none
