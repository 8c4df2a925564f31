"""The joins' graph as Kafka Streams builds it: processor and store names, sub-topologies and the
describe() text Kafka prints (its own tests' expected topologies); what cannot run is refused at
build time with a message. No Spark here."""

from __future__ import annotations

import pytest

from odradek.streams import (
    JoinWindows,
    Materialized,
    Serdes,
    StreamJoined,
    StreamsBuilder,
    TopologyException,
)
from odradek.streams.apps import page_views_by_region

# KStreamKStreamJoinTest's expected topology for stream("topic").join(stream("topic2"), …).
INNER_JOIN = """\
Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])
      --> KSTREAM-WINDOWED-0000000002
    Source: KSTREAM-SOURCE-0000000001 (topics: [topic2])
      --> KSTREAM-WINDOWED-0000000003
    Processor: KSTREAM-WINDOWED-0000000002 (stores: [KSTREAM-JOINTHIS-0000000004-store])
      --> KSTREAM-JOINTHIS-0000000004
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-WINDOWED-0000000003 (stores: [KSTREAM-JOINOTHER-0000000005-store])
      --> KSTREAM-JOINOTHER-0000000005
      <-- KSTREAM-SOURCE-0000000001
    Processor: KSTREAM-JOINOTHER-0000000005 (stores: [KSTREAM-JOINTHIS-0000000004-store])
      --> KSTREAM-MERGE-0000000006
      <-- KSTREAM-WINDOWED-0000000003
    Processor: KSTREAM-JOINTHIS-0000000004 (stores: [KSTREAM-JOINOTHER-0000000005-store])
      --> KSTREAM-MERGE-0000000006
      <-- KSTREAM-WINDOWED-0000000002
    Processor: KSTREAM-MERGE-0000000006 (stores: [])
      --> none
      <-- KSTREAM-JOINTHIS-0000000004, KSTREAM-JOINOTHER-0000000005

"""


def test_stream_stream_join_describes_as_kafka_does():
    builder = StreamsBuilder()
    builder.stream("topic").join(
        builder.stream("topic2"), lambda a, b: a + b, JoinWindows.of_time_difference_with_no_grace(1000)
    )
    topology = builder.build()
    assert str(topology.describe()) == INNER_JOIN
    assert topology.changelog_topics("app") == []  # the window stores live in Spark's state store


@pytest.mark.parametrize(
    ("how", "this", "other"),
    [
        ("left_join", "KSTREAM-JOINTHIS-", "KSTREAM-OUTEROTHER-"),
        ("outer_join", "KSTREAM-OUTERTHIS-", "KSTREAM-OUTEROTHER-"),
    ],
)
def test_left_and_outer_joins_rename_the_sides_and_share_a_store(how, this, other):
    builder = StreamsBuilder()
    windows = JoinWindows.of_time_difference_and_grace(1000, 500).before(2000)
    assert (windows.before_ms, windows.after_ms, windows.grace_ms) == (2000, 1000, 500)
    getattr(builder.stream("a"), how)(builder.stream("b"), lambda x, y: (x, y), windows)
    names = [n.name for n in builder.build().nodes]
    assert names[4:7] == [f"{this}0000000004", f"{other}0000000005", "KSTREAM-MERGE-0000000006"]
    assert "KSTREAM-OUTERSHARED-0000000004-store" in builder.build().stores


def test_stream_joined_names_the_processors():
    builder = StreamsBuilder()
    builder.stream("a").left_join(
        builder.stream("b"),
        lambda x, y: (x, y),
        JoinWindows.of_time_difference_with_no_grace(1000),
        StreamJoined.with_(Serdes.String(), Serdes.String(), Serdes.String()).with_name("op"),
    )
    topology = builder.build()
    assert [n.name for n in topology.nodes][2:] == [
        "op-this-windowed",
        "op-other-windowed",
        "op-this-join",
        "op-outer-other-join",
        "op-merge",
    ]
    assert sorted(topology.stores) == [
        "KSTREAM-JOINTHIS-0000000004-store",
        "KSTREAM-OUTEROTHER-0000000005-store",
        "KSTREAM-OUTERSHARED-0000000004-store",
    ]


def test_key_changed_stream_is_repartitioned_before_a_join():
    builder = StreamsBuilder()
    table = builder.table("regions")
    builder.stream("views").select_key(lambda k, v: v).join(table, lambda v, r: r).to("out")
    topology = builder.build()
    assert topology.repartition_topics() == ["KSTREAM-KEY-SELECT-0000000004-repartition"]
    assert len(topology.describe().subtopologies) == 2


def test_page_views_by_region_topology():
    topology = page_views_by_region.topology("views", "regions", "counts")
    text = str(topology.describe())
    assert "Processor: KSTREAM-JOIN-0000000004 (stores: [regions-STATE-STORE-0000000001])" in text
    assert "Sink: KSTREAM-SINK-0000000007 (topic: views-per-region-repartition)" in text
    assert topology.changelog_topics("pvr") == [
        "pvr-regions-STATE-STORE-0000000001-changelog",
        "pvr-views-per-region-changelog",
    ]


def test_what_cannot_run_is_refused_with_a_message():
    builder = StreamsBuilder()
    left, right = builder.table("l"), builder.table("r")
    with pytest.raises(TopologyException, match="materialized KTable-KTable join"):
        left.join(right, lambda a, b: a, Materialized.as_("joined"))
    with pytest.raises(TopologyException, match="JoinWindows"):
        builder.stream("s").join(builder.stream("t"), lambda a, b: a)
    with pytest.raises(TopologyException, match="no outer one"):
        builder.stream("s").outer_join(left, lambda a, b: a)
    with pytest.raises(TopologyException, match="joins another KTable"):
        left.join(builder.stream("s"), lambda a, b: a)
