"""Replication on ``/metrics``, scraped from real broker processes of a 3-broker cluster:
Kafka's ReplicationBytesInPerSec (followers), ReplicationBytesOutPerSec (the leader),
BytesOutPerSec without the followers' fetches, and the fetchers' MaxLag and ConsumerLag."""

from __future__ import annotations

import confluent_kafka

from odradek.testing.embedded_cluster import EmbeddedCluster
from tests.cluster.chaos_support import _until

TOPIC = "metered"
SETTINGS = {"replica.fetch.wait.max.ms": 200, "replica.fetch.backoff.ms": 200, "auto.create.topics.enable": "false"}


def _scrape(url: str) -> dict[str, float]:
    """/metrics as {sample with labels: value}."""
    import urllib.request

    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def _counter(samples: dict, family: str, topic: str | None = None) -> float:
    return samples.get(f'{family}_total{{topic="{topic}"}}' if topic else f"{family}_total", 0.0)


def test_replication_bytes_are_counted_apart_from_consumer_bytes_and_lag_drops_to_zero():
    values = [bytes([i % 251]) * 1000 for i in range(500)]
    produced = sum(len(v) for v in values)
    with EmbeddedCluster(3, overrides=SETTINGS) as cluster:
        cluster.create_topic(TOPIC, 1, 3)
        leader = cluster.leader(TOPIC, 0)
        followers = [b for b in cluster.brokers if b != leader]
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5}
        )
        for v in values:
            producer.produce(TOPIC, v, partition=0)
        assert producer.flush(30) == 0
        url = {b: cluster.brokers[b].http_url for b in cluster.brokers}

        def end_offset(b):
            return _scrape(url[b]).get(f'kafka_log_log_logendoffset{{partition="0",topic="{TOPIC}"}}')

        assert _until(lambda: all(end_offset(b) == len(values) for b in followers), 30), "followers lag"
        on_leader = _scrape(url[leader])
        appended = _counter(on_leader, "kafka_server_brokertopicmetrics_bytesin", TOPIC)
        assert appended >= produced
        # the followers' fetches are replication, not consumer bytes
        assert _counter(on_leader, "kafka_server_brokertopicmetrics_bytesout", TOPIC) == 0
        assert _counter(on_leader, "kafka_server_brokertopicmetrics_replicationbytesout", TOPIC) >= 2 * appended
        assert _counter(on_leader, "kafka_server_brokertopicmetrics_replicationbytesout") >= 2 * appended
        for b in followers:
            samples = _scrape(url[b])
            # byte for byte copies: exactly what the leader appended, and nothing counted as produced
            assert _counter(samples, "kafka_server_brokertopicmetrics_replicationbytesin", TOPIC) == appended
            assert _counter(samples, "kafka_server_brokertopicmetrics_replicationbytesin") >= produced
            assert _counter(samples, "kafka_server_brokertopicmetrics_bytesin", TOPIC) == 0
            lag = f'kafka_server_fetcherlagmetrics_consumerlag{{clientId="ReplicaFetcherThread-0-{leader}",partition="0",topic="{TOPIC}"}}'
            assert _until(lambda b=b, lag=lag: _scrape(url[b]).get(lag) == 0, 30), f"broker {b}'s lag"
            assert _scrape(url[b])['kafka_server_replicafetchermanager_maxlag{clientId="Replica"}'] == 0
        assert on_leader['kafka_server_replicafetchermanager_maxlag{clientId="Replica"}'] == 0
        assert on_leader["kafka_server_replicamanager_underreplicatedpartitions"] == 0

        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "m", "enable.auto.commit": False}
        )
        consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        got = 0
        deadline_polls = 300
        while got < len(values) and deadline_polls:
            got += sum(1 for m in consumer.consume(500, 0.1) if m.error() is None)
            deadline_polls -= 1
        consumer.close()
        assert got == len(values)
        assert _counter(_scrape(url[leader]), "kafka_server_brokertopicmetrics_bytesout", TOPIC) >= appended
