"""Joins and table re-grouping in the TopologyTestDriver: a KTable-KTable join's changelog (updates
on either side, tombstones) and KTable.group_by with a subtractor, checked record by record against
an independent replay of the same updates in the test; a KStream-KTable join where a stream
record sees the table as it was at its time and table updates emit nothing."""

from __future__ import annotations

import pytest

from odradek.streams import (
    Consumed,
    Grouped,
    Materialized,
    Serdes,
    StreamsBuilder,
    TopologyTestDriver,
)

pytestmark = pytest.mark.timeout(400)

CONFIG = {
    "application.id": "joins-test",
    "default.key.serde": Serdes.String(),
    "default.value.serde": Serdes.String(),
}
S = Serdes.String()


def replay_table_join(updates, how):
    """Independent: per key, the join's row after each update; an update that touches a row emits
    it (None: gone)."""
    left, right, out = {}, {}, []

    def row(k):
        lv, rv = left.get(k), right.get(k)
        if (how == "inner" and (lv is None or rv is None)) or (how == "left" and lv is None):
            return None
        if lv is None and rv is None:
            return None
        return f"{lv}/{rv}"

    for side, key, value in updates:
        before = row(key)
        table = left if side == "L" else right
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
        after = row(key)
        if after is not None or before is not None:
            out.append((key, after))
    return out


UPDATES = [
    ("L", "a", "1"),
    ("R", "a", "x"),
    ("L", "b", "2"),
    ("R", "c", "z"),
    ("L", "a", "11"),
    ("R", "b", "y"),
    ("R", "a", None),  # tombstone on the right
    ("L", "b", None),  # tombstone on the left
    ("L", "c", "3"),
]


def per_key(records):
    """Each key's values in order (Kafka orders a key's updates; keys interleave freely)."""
    out: dict = {}
    for key, value in records:
        out.setdefault(key, []).append(value)
    return out


def test_table_table_joins_emit_their_changelogs(spark):
    builder = StreamsBuilder()
    left, right = builder.table("left"), builder.table("right")
    left.join(right, lambda lv, rv: f"{lv}/{rv}").to_stream().to("inner")
    left.left_join(right, lambda lv, rv: f"{lv}/{rv}").to_stream().to("left")
    left.outer_join(right, lambda key, lv, rv: f"{lv}/{rv}").to_stream().to("outer")
    topology = builder.build()
    text = str(topology.describe())
    assert "Processor: KTABLE-JOINTHIS-0000000007 (stores: [right-STATE-STORE-0000000003])" in text
    assert "<-- KTABLE-JOINTHIS-0000000007, KTABLE-JOINOTHER-0000000008" in text
    driver = TopologyTestDriver(topology, {**CONFIG, "application.id": "tt"}, spark=spark)
    try:
        topics = {"L": driver.create_input_topic("left", S, S), "R": driver.create_input_topic("right", S, S)}
        outputs = {how: driver.create_output_topic(how, S, S) for how in ("inner", "left", "outer")}
        for i, (side, key, value) in enumerate(UPDATES):
            topics[side].pipe_input(key, value, timestamp_ms=1_000 * (i + 1))
        for how, topic in outputs.items():
            assert per_key(topic.read_key_values_to_list()) == per_key(replay_table_join(UPDATES, how)), how
    finally:
        driver.close()


def test_table_group_by_subtracts_from_the_old_group(spark):
    builder = StreamsBuilder()
    users = builder.table("user-regions", Consumed(S, S))
    grouped = users.group_by(lambda user, region: (region, len(user)), Grouped.with_(S, Serdes.Long()))
    grouped.count(Materialized.as_("users-per-region")).to_stream().to("region-counts")
    grouped.reduce(lambda a, b: a + b, lambda a, b: a - b, Materialized.as_("name-lengths")).to_stream().to(
        "region-lengths"
    )
    topology = builder.build()
    text = str(topology.describe())
    assert "Processor: KTABLE-SELECT-0000000003 (stores: [])" in text
    assert "Sink: KSTREAM-SINK-0000000004 (topic: users-per-region-repartition)" in text
    assert "Processor: KTABLE-REDUCE-0000000011 (stores: [name-lengths])" in text
    assert topology.repartition_topics() == ["name-lengths-repartition", "users-per-region-repartition"]
    config = {**CONFIG, "application.id": "regroup", "default.value.serde": Serdes.Long()}
    driver = TopologyTestDriver(topology, config, spark=spark)
    moves = [
        [("alice", "eu"), ("bob", "eu"), ("carol", "us"), ("dave", "asia")],
        [("bob", "us"), ("alice", None), ("erin", "eu"), ("carol", "asia"), ("dave", None), ("carol", "us")],
    ]
    try:
        updates = driver.create_input_topic("user-regions", S, S)
        counts = driver.create_output_topic("region-counts", S, Serdes.Long())
        sums = driver.create_output_topic("region-lengths", S, Serdes.Long())
        table: dict[str, str] = {}
        for batch in moves:
            updates.pipe_key_value_list(batch)
            touched = set()
            for user, region in batch:
                if user in table:
                    touched.add(table.pop(user))
                if region is not None:
                    table[user] = region
                    touched.add(region)
            # Independent: the groups the batch touched, with their counts and sums from scratch.
            got_counts = counts.read_key_values_to_list()
            got_sums = sums.read_key_values_to_list()
            assert sorted(got_counts) == sorted((r, sum(v == r for v in table.values())) for r in touched)
            assert sorted(got_sums) == sorted(
                (r, sum(len(u) for u, v in table.items() if v == r)) for r in touched
            )
        assert ("asia", 0) in got_counts  # a group emptied to 0 stays, as in Kafka
    finally:
        driver.close()


def test_stream_table_join_sees_the_table_at_the_record_time(spark):
    builder = StreamsBuilder()
    regions = builder.table("regions", Consumed(S, S))
    views = builder.stream("views", Consumed(S, S))
    views.join(regions, lambda page, region: f"{page}@{region}").to("inner-out")
    views.left_join(regions, lambda user, page, region: f"{user}:{page}@{region}").to("left-out")
    topology = builder.build()
    assert "KSTREAM-JOIN-0000000004" in str(topology.describe())
    assert "KSTREAM-LEFTJOIN-0000000006" in str(topology.describe())
    driver = TopologyTestDriver(topology, {**CONFIG, "application.id": "st"}, spark=spark)
    events = [  # (time, topic, key, value), piped out of time order within one batch
        (10, "regions", "u1", "eu"),
        (20, "views", "u1", "/a"),
        (40, "regions", "u1", "us"),
        (30, "views", "u1", "/b"),
        (35, "views", "u2", "/c"),
        (50, "views", "u1", "/d"),
        (60, "regions", "u2", "asia"),  # emits nothing by itself
        (60, "regions", "u1", None),
        (70, "views", "u1", "/e"),
    ]
    try:
        inputs = {t: driver.create_input_topic(t, S, S) for t in ("regions", "views")}
        for ts, topic, key, value in events:
            inputs[topic].pipe_input(key, value, timestamp_ms=ts)
        inner = driver.create_output_topic("inner-out", S, S).read_key_values_to_list()
        left = driver.create_output_topic("left-out", S, S).read_key_values_to_list()
    finally:
        driver.close()
    table: dict[str, str | None] = {}
    want_inner, want_left = [], []
    for _ts, topic, key, value in sorted(events, key=lambda e: (e[0], e[1] != "regions")):
        if topic == "regions":
            table[key] = value
            continue
        region = table.get(key)
        if region is not None:
            want_inner.append((key, f"{value}@{region}"))
        want_left.append((key, f"{key}:{value}@{region}"))
    assert sorted(inner) == sorted(want_inner)
    assert sorted(left) == sorted(want_left)
    assert ("u1", "u1:/e@None") in left and ("u2", "u2:/c@None") in left
