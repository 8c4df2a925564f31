"""The DSL builds Kafka Streams' graph: names, sub-topologies and describe() text as Kafka prints
them; invalid configs and unsupported operations refused with one line naming what to change.
No Spark here."""

from __future__ import annotations

import subprocess
import sys

import pytest

from odradek.streams import (
    Branched,
    ConfigException,
    Materialized,
    Produced,
    Serdes,
    StreamsBuilder,
    StreamsConfig,
    Suppressed,
    TopologyException,
)

# Kafka's WordCountDemo topology, as `Topology.describe()` prints it in Kafka's documentation.
WORD_COUNT = """\
Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [streams-plaintext-input])
      --> KSTREAM-FLATMAPVALUES-0000000001
    Processor: KSTREAM-FLATMAPVALUES-0000000001 (stores: [])
      --> KSTREAM-KEY-SELECT-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-KEY-SELECT-0000000002 (stores: [])
      --> KSTREAM-FILTER-0000000005
      <-- KSTREAM-FLATMAPVALUES-0000000001
    Processor: KSTREAM-FILTER-0000000005 (stores: [])
      --> KSTREAM-SINK-0000000004
      <-- KSTREAM-KEY-SELECT-0000000002
    Sink: KSTREAM-SINK-0000000004 (topic: counts-store-repartition)
      <-- KSTREAM-FILTER-0000000005

   Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000006 (topics: [counts-store-repartition])
      --> KSTREAM-AGGREGATE-0000000003
    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [counts-store])
      --> KTABLE-TOSTREAM-0000000007
      <-- KSTREAM-SOURCE-0000000006
    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])
      --> KSTREAM-SINK-0000000008
      <-- KSTREAM-AGGREGATE-0000000003
    Sink: KSTREAM-SINK-0000000008 (topic: streams-wordcount-output)
      <-- KTABLE-TOSTREAM-0000000007

"""


def word_count():
    builder = StreamsBuilder()
    (
        builder.stream("streams-plaintext-input")
        .flat_map_values(lambda v: v.lower().split())
        .group_by(lambda k, v: v)
        .count(Materialized.as_("counts-store"))
        .to_stream()
        .to("streams-wordcount-output", Produced(Serdes.String(), Serdes.Long()))
    )
    return builder.build()


def test_word_count_describes_as_kafka_does():
    topology = word_count()
    assert str(topology.describe()) == WORD_COUNT
    assert topology.source_topics() == ["streams-plaintext-input"]
    assert topology.repartition_topics() == ["counts-store-repartition"]
    assert topology.changelog_topics("wc") == ["wc-counts-store-changelog"]


def test_unnamed_store_and_group_by_key_without_repartition():
    builder = StreamsBuilder()
    builder.stream("in").group_by_key().count().to_stream().to("out")
    topology = builder.build()
    names = [n.name for n in topology.nodes]
    # count() names its store before itself: the store takes index 1, the processor 2.
    assert names == [
        "KSTREAM-SOURCE-0000000000",
        "KSTREAM-AGGREGATE-0000000002",
        "KTABLE-TOSTREAM-0000000003",
        "KSTREAM-SINK-0000000004",
    ]
    assert list(topology.stores) == ["KSTREAM-AGGREGATE-STATE-STORE-0000000001"]
    assert topology.repartition_topics() == []  # the key did not change
    assert len(topology.describe().subtopologies) == 1


def test_split_names_branches_after_the_splitter():
    builder = StreamsBuilder()
    branches = (
        builder.stream("in")
        .split("route-")
        .branch(lambda k, v: v.startswith("a"), Branched.as_("a"))
        .branch(lambda k, v: v.startswith("b"))
        .default_branch()
    )
    assert sorted(branches) == ["route-0", "route-2", "route-a"]
    merged = branches["route-a"].merge(branches["route-2"])
    merged.to("out")
    text = str(builder.build().describe())
    assert "Processor: route- (stores: [])\n      --> route-0, route-2, route-a" in text
    assert "Processor: KSTREAM-MERGE-0000000001 (stores: [])" in text


def test_table_source_names_its_store_after_the_topic():
    builder = StreamsBuilder()
    builder.table("regions").to_stream().to("out")
    topology = builder.build()
    assert list(topology.stores) == ["regions-STATE-STORE-0000000000"]
    assert [n.name for n in topology.nodes][:2] == ["KSTREAM-SOURCE-0000000001", "KTABLE-SOURCE-0000000002"]


def test_unsupported_operations_are_refused_at_build_time():
    builder = StreamsBuilder()
    counts = builder.stream("in").group_by_key().count()
    with pytest.raises(TopologyException, match="only suppress"):
        counts.suppress(Suppressed.until_time_limit(1000))


@pytest.mark.parametrize(
    ("config", "named"),
    [
        (
            {"application.id": "a", "bootstrap.servers": "b:1", "commit.interval.msec": 5},
            "commit.interval.msec",
        ),
        ({"bootstrap.servers": "b:1"}, "application.id"),
        (
            {"application.id": "a", "bootstrap.servers": "b:1", "processing.guarantee": "exactly_twice"},
            "processing.guarantee",
        ),
        (
            {"application.id": "a", "bootstrap.servers": "b:1", "default.value.serde": "com.example.Nope"},
            "default.value.serde",
        ),
        ({"application.id": "a b", "bootstrap.servers": "b:1"}, "application.id"),
    ],
)
def test_invalid_config_is_named_in_one_line(config, named):
    with pytest.raises(ConfigException) as failure:
        StreamsConfig(config)
    assert named in str(failure.value) and "\n" not in str(failure.value)


def test_config_takes_kafka_class_names_and_spark_keys():
    config = StreamsConfig(
        {
            "application.id": "app",
            "bootstrap.servers": "b:1",
            "default.key.serde": "org.apache.kafka.common.serialization.Serdes$StringSerde",
            "default.value.serde": Serdes.Long(),
            "processing.guarantee": "exactly_once_v2",
            "num.stream.threads": 3,
            "spark.sql.shuffle.partitions": 7,
            "state.dir": "/tmp/x",
        }
    )
    assert config.key_serde == Serdes.String() and config.value_serde == Serdes.Long()
    assert config.exactly_once and config.commit_interval_ms == 100  # Kafka's default under EOS
    assert config.spark == {"spark.sql.shuffle.partitions": "7"}
    assert config.checkpoint_dir == "/tmp/x/app"


def test_cli_describe_prints_the_topology(tmp_path):
    app = tmp_path / "wordcount.py"
    app.write_text(
        "from odradek.streams import StreamsBuilder, Materialized, Produced, Serdes\n"
        "builder = StreamsBuilder()\n"
        "(builder.stream('streams-plaintext-input').flat_map_values(lambda v: v.lower().split())\n"
        " .group_by(lambda k, v: v).count(Materialized.as_('counts-store')).to_stream()\n"
        " .to('streams-wordcount-output', Produced(Serdes.String(), Serdes.Long())))\n"
        "topology = builder.build()\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "odradek", "streams", "describe", str(app)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == WORD_COUNT
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    out = subprocess.run(
        [sys.executable, "-m", "odradek", "streams", "describe", str(empty)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1 and "defines no `topology`" in out.stderr
