"""Joins and windows run by KafkaStreams against a real broker and against a 3-broker ZooKeeper
cluster: the page-views-by-region app (a stream-table join, counted by region through a
repartition topic), a stream-stream windowed left join and a windowed count with grace and
suppression (windowed_app.py); outputs read back with confluent-kafka and checked record by
record against an independent replay of the inputs in the test."""

from __future__ import annotations

import struct
import time

import pytest
from pipeline_kafka import create_topic, produce, read_topic
from support import wait_until
from windowed_app import run_windowed_count

from odradek.streams import JoinWindows, KafkaStreams, Serdes, State, StreamsBuilder
from odradek.streams.apps import page_views_by_region
from odradek.testing.embedded_cluster import EmbeddedCluster

pytestmark = pytest.mark.timeout(900)

CLUSTER_SETTINGS = {
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 3,
    "group.initial.rebalance.delay.ms": 0,
}


@pytest.fixture(scope="module", params=["broker", "cluster"])
def kafka(request, tmp_path_factory):
    """(bootstrap servers, replication factor): the session's broker, or a 3-broker cluster."""
    if request.param == "broker":
        yield request.getfixturevalue("broker").bootstrap_servers, 1
        return
    with EmbeddedCluster(
        3, overrides=CLUSTER_SETTINGS, data_dir=tmp_path_factory.mktemp("cluster")
    ) as cluster:
        yield cluster.bootstrap_servers, 3


def _running(streams) -> bool:
    """True while the app runs; a failed app fails the wait at once, with its cause."""
    assert streams.state() is State.RUNNING, streams.exception
    return True


def _run(topology, bootstrap, app_id, tmp_path, done):
    streams = KafkaStreams(
        topology,
        {
            "application.id": app_id,
            "bootstrap.servers": bootstrap,
            "default.key.serde": Serdes.String(),
            "default.value.serde": Serdes.String(),
            "commit.interval.ms": 300,
            "state.dir": str(tmp_path / "state"),
        },
    )
    streams.start()
    try:
        wait_until(lambda: _running(streams) and done(), 600, f"{app_id}'s output")
    finally:
        assert streams.close(120), streams.exception
    assert streams.exception is None


def test_page_views_by_region(spark, kafka, topic_name, tmp_path):
    bootstrap, replication = kafka
    views, regions, counts = f"{topic_name}-views", f"{topic_name}-regions", f"{topic_name}-counts"
    for topic in (views, regions):
        create_topic(bootstrap, topic, 2, replication_factor=replication)
    t0 = int(time.time() * 1000) - 3_600_000
    region_updates = [
        (0, "u1", "eu"),
        (0, "u2", "us"),
        (0, "u3", "eu"),
        (500, "u1", "asia"),
        (700, "u2", None),
    ]
    page_views = [(10 * i + 1, f"u{i % 4 + 1}", f"/p{i % 5}") for i in range(100)]  # u4 has no region
    produce(
        bootstrap,
        regions,
        [{"key": u.encode(), "value": r and r.encode(), "timestamp": t0 + t} for t, u, r in region_updates],
    )
    produce(
        bootstrap,
        views,
        [{"key": u.encode(), "value": p.encode(), "timestamp": t0 + t} for t, u, p in page_views],
    )

    # Independent: replay by time (a table update before a view of the same time).
    table: dict = {}
    expected: dict[str, int] = {}
    for _t, kind, user, value in sorted(
        [(t, 0, u, r) for t, u, r in region_updates] + [(t, 1, u, p) for t, u, p in page_views]
    ):
        if kind == 0:
            table[user] = value
        elif table.get(user) is not None:
            expected[table[user]] = expected.get(table[user], 0) + 1

    def latest():
        out: dict[str, list[int]] = {}
        for r in read_topic(bootstrap, counts):
            out.setdefault(r.key.decode(), []).append(struct.unpack(">q", r.value)[0])
        return out

    app_id = f"{topic_name}-pvr"
    topology = page_views_by_region.topology(views, regions, counts)
    _run(topology, bootstrap, app_id, tmp_path, lambda: {k: v[-1] for k, v in latest().items()} == expected)
    for region, values in latest().items():  # each update a running count: rising to the total
        assert values == sorted(values) and len(set(values)) == len(values), (region, values)
    # The repartition topic and the table's changelog, named as Kafka Streams names them.
    repartition = read_topic(bootstrap, f"{app_id}-views-per-region-repartition")
    assert len(repartition) == sum(expected.values())
    changelog = {r.key: r.value for r in read_topic(bootstrap, f"{app_id}-views-per-region-changelog")}
    assert {k.decode(): struct.unpack(">q", v)[0] for k, v in changelog.items()} == expected


def test_stream_stream_left_join(spark, kafka, topic_name, tmp_path):
    bootstrap, replication = kafka
    orders, payments, out = f"{topic_name}-orders", f"{topic_name}-payments", f"{topic_name}-paid"
    for topic in (orders, payments):
        create_topic(bootstrap, topic, 2, replication_factor=replication)
    t0 = int(time.time() * 1000) - 3_600_000
    window, grace = 5_000, 1_000
    order_list = [(f"o{i}", f"order{i}", t0 + 20_000 * i) for i in range(12)] + [
        ("end", "order-end", t0 + 900_000)
    ]
    payment_list = [(f"o{i}", f"pay{i}", t0 + 20_000 * i + 2_000) for i in range(0, 12, 2)]
    payment_list += [(f"o{i}", f"late-pay{i}", t0 + 20_000 * i + 8_000) for i in range(1, 12, 4)]
    payment_list += [("o4", "pay4-again", t0 + 80_000 - 4_000), ("end", "pay-end", t0 + 900_000)]
    produce(
        bootstrap,
        orders,
        [{"key": k.encode(), "value": v.encode(), "timestamp": t} for k, v, t in order_list],
    )
    produce(
        bootstrap,
        payments,
        [{"key": k.encode(), "value": v.encode(), "timestamp": t} for k, v, t in payment_list],
    )

    builder = StreamsBuilder()
    builder.stream(orders).left_join(
        builder.stream(payments),
        lambda order, payment: f"{order}+{payment}",
        JoinWindows.of_time_difference_and_grace(window, grace),
    ).to(out)

    # Independent: each order with each payment of its key within the window, else once with none
    # (every order's window closes: the "end" records move stream time far past them).
    expected = []
    for key, order, t in order_list:
        partners = [p for k, p, tp in payment_list if k == key and abs(tp - t) <= window]
        expected += [(key, f"{order}+{p}") for p in partners] or [(key, f"{order}+None")]

    def got():
        return sorted((r.key.decode(), r.value.decode()) for r in read_topic(bootstrap, out))

    _run(builder.build(), bootstrap, f"{topic_name}-ssj", tmp_path, lambda: len(got()) >= len(expected))
    assert got() == sorted(expected)


def test_windowed_count_with_grace_and_suppression(spark, kafka, topic_name, tmp_path):
    bootstrap, replication = kafka
    run_windowed_count(spark, bootstrap, topic_name, tmp_path / "state", **{"replication.factor": replication})
