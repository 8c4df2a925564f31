"""TopologyTestDriver: a topology's own Spark plan over piped records, no broker; outputs checked
against what the inputs imply."""

from __future__ import annotations

from collections import Counter

import pytest

from odradek.streams import (
    Consumed,
    Materialized,
    Produced,
    Serdes,
    StreamsBuilder,
    StreamsException,
    TopologyTestDriver,
)

pytestmark = pytest.mark.timeout(300)

CONFIG = {
    "application.id": "wordcount-test",
    "bootstrap.servers": "dummy:1234",
    "default.key.serde": Serdes.String(),
    "default.value.serde": Serdes.String(),
}


def word_count_topology():
    builder = StreamsBuilder()
    (
        builder.stream("plaintext-input")
        .flat_map_values(lambda line: line.lower().split())
        .group_by(lambda _key, word: word)
        .count(Materialized.as_("counts-store"))
        .to_stream()
        .to("wordcount-output", Produced(key_serde=Serdes.String(), value_serde=Serdes.Long()))
    )
    return builder.build()


def test_word_count_in_the_test_driver(spark):
    driver = TopologyTestDriver(word_count_topology(), CONFIG, spark=spark)
    try:
        lines = driver.create_input_topic("plaintext-input", Serdes.String(), Serdes.String())
        counts = driver.create_output_topic("wordcount-output", Serdes.String(), Serdes.Long())
        first = ["all streams lead to kafka", "hello kafka streams"]
        for line in first:
            lines.pipe_input(None, line)
        assert counts.read_key_values_to_map() == Counter(" ".join(first).split())
        # State carries over: the next records update the counts of the words they hold.
        second = ["join kafka summit", "Kafka"]
        for line in second:
            lines.pipe_input("k", line)
        assert counts.read_key_values_to_map() == {"kafka": 4, "join": 1, "summit": 1}
        assert counts.is_empty()
    finally:
        driver.close()


def test_stateless_ops_split_and_merge(spark):
    builder = StreamsBuilder()
    numbers = builder.stream("numbers", Consumed(key_serde=Serdes.String(), value_serde=Serdes.Long()))
    branches = numbers.filter_not(lambda k, v: v < 0).split().branch(lambda k, v: v % 2 == 0).default_branch()
    evens, odds = branches.values()
    (
        evens.map_values(lambda v: v * 10)
        .merge(odds.map(lambda k, v: (k.upper(), v + 1)))
        .peek(lambda k, v: None)
        .to("out", Produced(value_serde=Serdes.Long()))
    )
    odds.flat_map_values(lambda v: [str(v)] * 2).select_key(lambda k, v: f"odd-{k}").to(
        lambda k, v, ctx: "odd-strings", Produced(value_serde=Serdes.String())
    )
    driver = TopologyTestDriver(builder.build(), {**CONFIG, "application.id": "ops"}, spark=spark)
    try:
        numbers_in = driver.create_input_topic("numbers", Serdes.String(), Serdes.Long())
        sent = [(f"k{i}", v) for i, v in enumerate([4, 7, -2, 0, 9, -5, 12])]
        numbers_in.pipe_key_value_list(sent)
        out = driver.create_output_topic("out", Serdes.String(), Serdes.Long())
        strings = driver.create_output_topic("odd-strings", Serdes.String(), Serdes.String())
        expected = Counter((k, v * 10) if v % 2 == 0 else (k.upper(), v + 1) for k, v in sent if v >= 0)
        assert Counter(out.read_key_values_to_list()) == expected
        assert sorted(strings.read_key_values_to_list()) == sorted(
            (f"odd-{k}", str(v)) for k, v in sent if v >= 0 and v % 2 for _ in range(2)
        )
    finally:
        driver.close()


def test_reduce_and_aggregate_keep_state_between_reads(spark):
    builder = StreamsBuilder()
    grouped = builder.stream("purchases", Consumed(Serdes.String(), Serdes.Long())).group_by_key()
    grouped.reduce(lambda a, b: max(a, b), Materialized.as_("max-store")).to_stream().to(
        "max", Produced(Serdes.String(), Serdes.Long())
    )
    grouped.aggregate(
        lambda: [],
        lambda k, v, agg: agg + [v],
        Materialized.as_("all-store").with_value_serde(Serdes.JSON()),
    ).to_stream().to("all", Produced(Serdes.String(), Serdes.JSON()))
    driver = TopologyTestDriver(builder.build(), {**CONFIG, "application.id": "agg"}, spark=spark)
    try:
        purchases = driver.create_input_topic("purchases", Serdes.String(), Serdes.Long())
        purchases.pipe_key_value_list([("ann", 5), ("bob", 3), ("ann", 9), ("ann", 2)])
        maxima = driver.create_output_topic("max", Serdes.String(), Serdes.Long())
        everything = driver.create_output_topic("all", Serdes.String(), Serdes.JSON())
        assert maxima.read_key_values_to_map() == {"ann": 9, "bob": 3}
        assert everything.read_key_values_to_map() == {"ann": [5, 9, 2], "bob": [3]}
        purchases.pipe_key_value_list([("bob", 11), ("cid", 1)])
        assert maxima.read_key_values_to_map() == {"bob": 11, "cid": 1}
        assert everything.read_key_values_to_map() == {"bob": [3, 11], "cid": [1]}
    finally:
        driver.close()


def test_unreadable_value_goes_to_the_deserialization_handler(spark):
    def topology():
        builder = StreamsBuilder()
        builder.stream("in", Consumed(Serdes.String(), Serdes.Long())).map_values(lambda v: v + 1).to(
            "out", Produced(Serdes.String(), Serdes.Long())
        )
        return builder.build()

    def run(handler):
        config = {
            **CONFIG,
            "application.id": f"bad-{handler[:8]}",
            "default.deserialization.exception.handler": handler,
        }
        driver = TopologyTestDriver(topology(), config, spark=spark)
        try:
            raw = driver.create_input_topic("in", Serdes.String(), Serdes.ByteArray())
            raw.pipe_key_value_list(
                [("a", (1).to_bytes(8, "big")), ("b", b"bad"), ("c", (41).to_bytes(8, "big"))]
            )
            return driver.create_output_topic("out", Serdes.String(), Serdes.Long()).read_key_values_to_list()
        finally:
            driver.close()

    assert sorted(run("org.apache.kafka.streams.errors.LogAndContinueExceptionHandler")) == [
        ("a", 2),
        ("c", 42),
    ]
    with pytest.raises(Exception, match="deserialization failed for a record") as failure:
        run("org.apache.kafka.streams.errors.LogAndFailExceptionHandler")
    assert isinstance(failure.value, StreamsException) or "LogAndContinueExceptionHandler" in str(
        failure.value
    )
