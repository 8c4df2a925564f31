"""The pipelines, the batch reader and the exactly-once sink on a 3-broker ZooKeeper cluster,
bootstrapped through a broker that is not the controller (as a user who lists one broker
would), and a streaming run that goes on through a broker killed -9 (issue 30).

One cluster for the module (``EmbeddedCluster``: its own ZooKeeper and three broker
processes), default.replication.factor=3 and min.insync.replicas=2 as docs/cluster.md
sets a cluster up to survive a broker failure; the test session's SparkSession. The kill
test comes last: it leaves the cluster with two brokers.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource
from pipeline_kafka import check_page_views, create_topic, produce, read_topic, user_headers
from support import wait_until

from odradek.pipeline.cli import pipeline
from odradek.pipeline.exactly_once import COMMIT_TOPIC_CONFIGS
from odradek.pipeline.options import DEFAULT_COMMIT_TOPIC
from odradek.pipeline.pipelines import page_view_events
from odradek.pipeline.pipelines.run_config import RunConfig
from odradek.pipeline.publish import Publisher
from odradek.streams.apps import value_length
from odradek.testing.embedded_cluster import EmbeddedCluster

pytestmark = pytest.mark.timeout(420)

SETTINGS = {
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 3,
    "auto.create.topics.enable": "false",
    "replica.lag.time.max.ms": 4000,
    "replica.fetch.wait.max.ms": 200,
    "group.initial.rebalance.delay.ms": 0,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # A killed broker's leaderships move once its ZooKeeper session expires: 8 s, longer
    # than a fixed handful of quick retries lasts.
    with EmbeddedCluster(
        3, overrides=SETTINGS, data_dir=tmp_path_factory.mktemp("cluster"), session_timeout_ms=8000
    ) as c:
        yield c


@pytest.fixture
def not_controller(cluster) -> str:
    """The address of one running broker that is not the controller: the only one the
    pipelines are given."""
    controller = cluster.controller_id()
    node = min(n for n, b in cluster.brokers.items() if n != controller and b.proc.poll() is None)
    return cluster.brokers[node].bootstrap_servers


def _cli(*args: str) -> str:
    result = CliRunner().invoke(pipeline, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _replication(cluster, topic: str) -> tuple[int, str]:
    """(replicas per partition, the topic's effective min.insync.replicas)."""
    md = cluster.metadata([topic]).topics[topic]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    resource = ConfigResource("topic", topic)
    entry = admin.describe_configs([resource])[resource].result(30)["min.insync.replicas"]
    assert entry.source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value, (
        f"{topic} sets its own min.insync.replicas"
    )
    [replicas] = {len(p.replicas) for p in md.values()}
    return replicas, entry.value


def test_generate_and_run_page_views_from_the_command_line(
    spark, cluster, not_controller, topic_name, tmp_path
):
    events_topic, minute_topic, top_topic = f"{topic_name}-ev", f"{topic_name}-min", f"{topic_name}-top"
    t0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    out = _cli("generate", "page-views", "-b", not_controller, "-t", events_topic, "--count", "300",
               "--rate", "0", "--seed", "7", "--pages", "12", "--start-ms", str(t0), "--step-ms", "600")  # fmt: skip
    assert "sent 300" in out
    late = {"event_id": "late", "user": "u1", "page": "/page/0", "action": "view", "ts": t0 + 10 * 60_000}
    with Publisher(not_controller, events_topic) as pub:
        pub.send(json.dumps(late).encode(), key=b"u1")
    events = list(page_view_events.events(300, seed=7, pages=12, start_ms=t0, step_ms=600)) + [late]

    _cli("run", "page-views", "-b", not_controller, "--input", events_topic, "--output", minute_topic,
         "--top-topic", top_topic, "--top", "5", "--checkpoint", str(tmp_path / "ckpt"), "--available-now")  # fmt: skip

    check_page_views(
        cluster.bootstrap_servers, events, minute_topic, top_topic, 5, closed_before=t0 + 9 * 60_000
    )
    # Every topic the commands made has the cluster's replication; the sink's commit log
    # too, with the brokers' min.insync.replicas as __consumer_offsets has.
    for topic in (events_topic, minute_topic, top_topic):
        assert _replication(cluster, topic) == (3, "2"), topic
    assert _replication(cluster, DEFAULT_COMMIT_TOPIC) == (3, "2")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    assert not [t for t in admin.list_topics(timeout=30).topics if "None" in t]
    resource = ConfigResource("topic", DEFAULT_COMMIT_TOPIC)
    configs = admin.describe_configs([resource])[resource].result(30)
    assert {k: configs[k].value for k in COMMIT_TOPIC_CONFIGS} == COMMIT_TOPIC_CONFIGS


def test_run_value_length_from_the_command_line(spark, cluster, not_controller, topic_name, tmp_path):
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(cluster.bootstrap_servers, source, 2, replication_factor=3)
    sent = [{"key": f"k{i}".encode(), "value": "é" * (i % 40)} for i in range(120)]
    produce(cluster.bootstrap_servers, source, sent)
    _cli("run", "value-length", "-b", not_controller, "--input", source, "--output", target,
         "--checkpoint", str(tmp_path / "ckpt"), "--available-now")  # fmt: skip
    out = read_topic(cluster.bootstrap_servers, target)
    assert sorted((r.key, r.value) for r in out) == sorted(
        (f"k{i}".encode(), str(i % 40).encode()) for i in range(120)
    )
    assert _replication(cluster, target)[0] == 3  # created by the command: the cluster's default


def test_streams_seed_example_and_word_count_on_the_cluster(
    spark, cluster, not_controller, topic_name, tmp_path
):
    """One Streams app (two topologies' worth: the seed's mapValues(length) and Kafka's WordCount
    with counts as longs) through one broker of the cluster: outputs checked record by record,
    the store's changelog topic replicated three times."""
    from odradek.streams import KafkaStreams, Materialized, Produced, Serdes, StreamsBuilder

    values_in, lengths = f"{topic_name}-values", f"{topic_name}-lengths"
    lines_in, counts = f"{topic_name}-lines", f"{topic_name}-counts"
    for name in (values_in, lines_in):
        create_topic(cluster.bootstrap_servers, name, 3, replication_factor=3)
    values = [{"key": f"user-{i % 7}".encode(), "value": ("ü" * (i % 30)).encode()} for i in range(150)]
    produce(cluster.bootstrap_servers, values_in, values)
    lines = [f"all streams lead to {'kafka ' * (i % 3)}{i % 5}" for i in range(90)]
    produce(cluster.bootstrap_servers, lines_in, [{"value": line.encode()} for line in lines])

    builder = StreamsBuilder()
    builder.stream(values_in).map_values(lambda v: str(len(v))).to(lengths)
    (
        builder.stream(lines_in)
        .flat_map_values(lambda line: line.lower().split())
        .group_by(lambda _key, word: word)
        .count(Materialized.as_("counts-store"))
        .to_stream()
        .to(counts, Produced(key_serde=Serdes.String(), value_serde=Serdes.Long()))
    )
    app_id = f"{topic_name}-app"
    streams = KafkaStreams(
        builder.build(),
        {
            "application.id": app_id,
            "bootstrap.servers": not_controller,
            "default.key.serde": Serdes.String(),
            "default.value.serde": Serdes.String(),
            "replication.factor": 3,
            "state.dir": str(tmp_path / "state"),
        },
        spark=spark,
        trigger={"availableNow": True},
    )
    streams.start()
    try:
        streams.await_termination(300)
    finally:
        assert streams.close(60)
    assert all(q.exception() is None for q in streams.queries())

    inputs = read_topic(cluster.bootstrap_servers, values_in)
    out = read_topic(cluster.bootstrap_servers, lengths)
    assert len(out) == len(inputs) == 150
    for key in {r.key for r in inputs}:  # per key, in input order
        assert [r.value for r in out if r.key == key] == [
            str(len(r.value.decode())).encode() for r in inputs if r.key == key
        ]
    expected = Counter(word for line in lines for word in line.lower().split())
    table = {}
    for r in read_topic(cluster.bootstrap_servers, counts):
        assert len(r.value) == 8
        table[r.key.decode()] = int.from_bytes(r.value, "big", signed=True)
    assert table == expected
    assert _replication(cluster, f"{app_id}-counts-store-changelog")[0] == 3


def test_batch_read_through_a_broker_that_is_not_the_controller(spark, cluster, not_controller, topic_name):
    create_topic(cluster.bootstrap_servers, topic_name, 3, replication_factor=2)
    produce(
        cluster.bootstrap_servers, topic_name, [{"key": b"k%d" % i, "value": b"v%d" % i} for i in range(150)]
    )
    rows = (
        spark.read.format("odradek")
        .option("kafka.bootstrap.servers", not_controller)
        .option("subscribe", topic_name)
        .load()
        .select("key", "value", "partition", "offset")
        .collect()
    )
    truth = read_topic(cluster.bootstrap_servers, topic_name)
    assert sorted((r.partition, r.offset, r.key, r.value) for r in rows) == [
        (t.partition, t.offset, t.key, t.value) for t in truth
    ]


def test_exactly_once_stream_goes_on_through_a_broker_killed(
    spark, cluster, not_controller, topic_name, tmp_path
):
    """value-length streaming through the bootstrap broker while another broker, leader of
    an input and an output partition, is killed -9 mid-run: every input record comes out
    once, none twice, and the query keeps running."""
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    bootstrap_node = next(n for n, b in cluster.brokers.items() if b.bootstrap_servers == not_controller)
    victim, third = (n for n in cluster.brokers if n != bootstrap_node)
    # The victim leads partition 0 of both; partition 1 stays led by the others.
    create_topic(
        cluster.bootstrap_servers,
        source,
        replicas=[[victim, bootstrap_node, third], [bootstrap_node, third, victim]],
    )
    create_topic(
        cluster.bootstrap_servers,
        target,
        replicas=[[victim, third, bootstrap_node], [third, bootstrap_node, victim]],
    )
    config = RunConfig(
        bootstrap_servers=not_controller, checkpoint=str(tmp_path / "ckpt"), trigger="1 second"
    )
    [query] = value_length.start(spark, config, input_topic=source, output_topic=target)
    total = 600

    def record(i: int) -> dict:
        return {"key": f"k{i}".encode(), "value": ("x" * (i % 50)).encode(), "partition": i % 2}

    def feed(first: int, last: int) -> None:  # a trickle, so that batches keep coming
        for start in range(first, last, 25):
            produce(
                cluster.bootstrap_servers, source, [record(i) for i in range(start, min(start + 25, last))]
            )
            time.sleep(0.1)

    try:
        feed(0, 200)
        wait_until(
            lambda: len(read_topic(cluster.bootstrap_servers, target)) >= 100 or not query.isActive,
            120,
            "the first output",
            interval=0.5,
        )
        assert query.isActive, query.exception()
        feeder = threading.Thread(target=feed, args=(200, total))
        feeder.start()
        cluster.kill(victim)
        feeder.join(120)
        assert not feeder.is_alive()
        wait_until(
            lambda: len(read_topic(cluster.bootstrap_servers, target)) >= total or not query.isActive,
            180,
            f"{total} records in {target}",
            interval=1,
        )
        assert query.isActive, query.exception()
        assert cluster.leader(target, 0) != victim
    finally:
        query.stop()
    assert query.exception() is None
    out = read_topic(cluster.bootstrap_servers, target)
    keys = [r.key for r in out]
    assert len(keys) == len(set(keys)), "a record came out twice"
    assert sorted((r.key, r.value) for r in out) == sorted(
        (f"k{i}".encode(), str(i % 50).encode()) for i in range(total)
    )
    assert all(user_headers(r) == () for r in out)
