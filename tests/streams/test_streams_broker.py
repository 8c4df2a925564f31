"""Streams apps against a real broker: the seed's example verbatim and Kafka's WordCount demo,
outputs read back with confluent-kafka and checked record by record against an independent
computation; a topology reading a missing topic fails at start in one line."""

from __future__ import annotations

import struct
from collections import Counter

import pytest
from pipeline_kafka import create_topic, produce, read_topic
from support import wait_until

from odradek.streams import (
    InvalidStateStoreException,
    KafkaStreams,
    Materialized,
    MissingSourceTopicException,
    Produced,
    Serdes,
    State,
    StreamsBuilder,
    StreamsUncaughtExceptionHandler,
)

pytestmark = pytest.mark.timeout(900)


def _running(streams) -> bool:
    """True while the app runs; a failed app fails the wait at once, with its cause."""
    assert streams.state() is State.RUNNING, streams.exception
    return True


def _config(broker, app_id, tmp_path, **extra):
    return {
        "application.id": app_id,
        "bootstrap.servers": broker.bootstrap_servers,
        "default.key.serde": Serdes.String(),
        "default.value.serde": "org.apache.kafka.common.serialization.Serdes$StringSerde",
        "commit.interval.ms": 200,
        "state.dir": str(tmp_path / "state"),
        **extra,
    }


def test_the_seed_example_verbatim(spark, broker, topic_name, tmp_path):
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(broker.bootstrap_servers, source, 2)
    create_topic(broker.bootstrap_servers, target, 2)
    values = ["", "a", "hello", "ünïcödé", "日本語のテキスト", "x" * 1000]
    produce(
        broker.bootstrap_servers,
        source,
        [{"key": f"user-{i % 5}".encode(), "value": v.encode()} for i, v in enumerate(values * 10)],
    )

    builder = StreamsBuilder()
    builder.stream(source).map_values(lambda v: str(len(v))).to(target)
    streams = KafkaStreams(builder.build(), _config(broker, f"{topic_name}-app", tmp_path))
    streams.start()
    try:
        assert streams.state() is State.RUNNING
        wait_until(
            lambda: _running(streams) and len(read_topic(broker.bootstrap_servers, target)) >= 60,
            420,
            "60 output records",
        )
    finally:
        assert streams.close(60)
    assert streams.state() is State.NOT_RUNNING

    inputs = read_topic(broker.bootstrap_servers, source)
    out = read_topic(broker.bootstrap_servers, target)
    assert len(out) == len(inputs)
    for key in {r.key for r in inputs}:  # per key, the lengths in the order the values came
        assert [r.value for r in out if r.key == key] == [
            str(len(r.value.decode())).encode() for r in inputs if r.key == key
        ]


def test_word_count_demo_counts_as_longs(spark, broker, topic_name, tmp_path):
    source, target = f"{topic_name}-lines", f"{topic_name}-counts"
    create_topic(broker.bootstrap_servers, source, 2)
    lines = [f"the quick brown fox {i % 7} jumps over the lazy dog {i % 3}" for i in range(120)]
    produce(broker.bootstrap_servers, source, [{"value": line.encode()} for line in lines])

    builder = StreamsBuilder()
    (
        builder.stream(source)
        .flat_map_values(lambda line: line.lower().split())
        .group_by(lambda _key, word: word)
        .count(Materialized.as_("counts-store"))
        .to_stream()
        .to(target, Produced(key_serde=Serdes.String(), value_serde=Serdes.Long()))
    )
    app_id = f"{topic_name}-wc"
    streams = KafkaStreams(builder.build(), _config(broker, app_id, tmp_path))
    streams.start()
    expected = Counter(word for line in lines for word in line.lower().split())

    def latest(topic):
        table = {}
        for r in read_topic(broker.bootstrap_servers, topic):
            assert len(r.value) == 8, "a count is Kafka's 8-byte big-endian long"
            table[r.key.decode()] = struct.unpack(">q", r.value)[0]
        return table

    try:
        wait_until(lambda: _running(streams) and latest(target) == expected, 420, "the word counts")
        _query_the_store(streams, broker, source, expected)
    finally:
        assert streams.close(60)
    # The store's changelog topic, named as Kafka Streams names it, holds the same table.
    assert latest(f"{app_id}-counts-store-changelog") == expected
    with pytest.raises(InvalidStateStoreException, match="not running"):
        streams.store("counts-store")


def _query_the_store(streams, broker, source, expected: Counter) -> None:
    """Interactive queries on the running app's table: lookups, ranges (in key order), the
    entry count, fresh after more input; a name the topology lacks is Kafka's
    InvalidStateStoreException."""
    store = streams.store("counts-store")
    assert store.get("fox") == expected["fox"] and store.get("absent") is None
    assert store.approximate_num_entries() == len(expected)
    assert list(store.all()) == sorted(expected.items())
    assert [(e.key, e.value) for e in store.range("1", "dog")] == sorted(
        (w, n) for w, n in expected.items() if "1" <= w <= "dog"
    )
    produce(broker.bootstrap_servers, source, [{"value": b"fox zebra"}])
    # One micro-batch writes the two words' changelog partitions one after the other.
    wait_until(
        lambda: _running(streams) and (store.get("zebra"), store.get("fox")) == (1, expected["fox"] + 1),
        420,
        "the store to see a new line",
    )
    assert store.approximate_num_entries() == len(expected) + 1
    expected.update(["fox", "zebra"])
    with pytest.raises(InvalidStateStoreException, match="no state store named 'nope'"):
        streams.store("nope")


def test_missing_source_topic_fails_at_start_in_one_line(broker, topic_name, tmp_path):
    builder = StreamsBuilder()
    builder.stream(f"{topic_name}-absent").to(f"{topic_name}-out")
    streams = KafkaStreams(builder.build(), _config(broker, f"{topic_name}-app", tmp_path))
    with pytest.raises(MissingSourceTopicException) as failure:
        streams.start()
    message = str(failure.value)
    assert "\n" not in message and f"{topic_name}-absent" in message and "missing" in message
    assert streams.state() is State.ERROR


def test_a_failing_function_reaches_the_uncaught_exception_handler(spark, broker, topic_name, tmp_path):
    source = f"{topic_name}-in"
    create_topic(broker.bootstrap_servers, source, 1)
    produce(broker.bootstrap_servers, source, [{"value": b"fine"}, {"value": b"boom"}])
    builder = StreamsBuilder()
    builder.stream(source).map_values(lambda v: 1 / 0 if v == "boom" else v).to(f"{topic_name}-out")
    streams = KafkaStreams(builder.build(), _config(broker, f"{topic_name}-app", tmp_path))
    seen = []

    def handler(exc):
        seen.append(exc)
        return StreamsUncaughtExceptionHandler.SHUTDOWN_CLIENT

    streams.set_uncaught_exception_handler(handler)
    streams.start()
    try:
        wait_until(lambda: streams.state() is State.ERROR, 420, "the app to fail")
    finally:
        streams.close(60)
    assert len(seen) == 1 and "ZeroDivisionError" in str(seen[0])
