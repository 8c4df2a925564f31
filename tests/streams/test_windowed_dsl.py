"""Windowed aggregations and suppression through the DSL, run by the TopologyTestDriver (the Spark
plan KafkaStreams runs, fed from piped records), checked read by read against an independent model
of Kafka's rules (windows_model.py): tumbling counts with grace, out-of-order and late records,
final results under suppression, hopping reduces, session aggregates with a merger (sliding
windows: test_sliding_windows.py); and
describe() naming the windowed processors and stores as Kafka does."""

from __future__ import annotations

import pytest
from windows_model import CountModel, sessions, windows_of

from odradek.streams import (
    BufferConfig,
    Materialized,
    Produced,
    Serdes,
    SessionWindows,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    TopologyException,
    TopologyTestDriver,
)
from odradek.streams.windowed import Window, Windowed, WindowedSerdes

pytestmark = pytest.mark.timeout(600)

SIZE, GRACE = 10_000, 5_000
CONFIG = {"default.key.serde": Serdes.String(), "default.value.serde": Serdes.String()}


def _count_topology():
    builder = StreamsBuilder()
    counts = (
        builder.stream("clicks")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(SIZE, GRACE))
        .count(Materialized.as_("click-counts"))
    )
    windowed = WindowedSerdes.time_windowed_serde_from(Serdes.String(), SIZE)
    counts.to_stream().to("updates", Produced(key_serde=windowed, value_serde=Serdes.Long()))
    (
        counts.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .to("finals", Produced(key_serde=windowed, value_serde=Serdes.Long()))
    )
    return builder.build()


def test_describe_names_windowed_processors_and_stores_as_kafka():
    text = str(_count_topology().describe())
    assert "Processor: KSTREAM-AGGREGATE-0000000001 (stores: [click-counts])" in text
    assert "      --> KTABLE-SUPPRESS-0000000004, KTABLE-TOSTREAM-0000000002\n" in text
    assert "Processor: KTABLE-SUPPRESS-0000000004 (stores: [KTABLE-SUPPRESS-STATE-STORE-0000000005])" in text
    assert _count_topology().changelog_topics("app") == ["app-click-counts-changelog"]
    with pytest.raises(TopologyException, match="windowed aggregation"):
        StreamsBuilder().stream("s").to_table().suppress(Suppressed.until_window_closes())


def test_tumbling_count_with_grace_late_records_and_final_results(spark):
    # Batches piped between two reads (one micro-batch each).
    batches = [
        [("a", 1_000), ("b", 2_000), ("a", 12_000), ("a", 8_000)],  # a@8000: out of order, in grace
        [("b", 16_000), ("a", 3_000), ("a", 9_999), ("b", 11_000)],  # a@3000, a@9999: late
        [("c", 100_000), ("b", 19_000)],  # c closes every window before it; b@19000: late
    ]
    model = CountModel(SIZE, GRACE)
    with TopologyTestDriver(_count_topology(), CONFIG, spark=spark) as driver:
        clicks = driver.create_input_topic("clicks", Serdes.String(), Serdes.String())
        windowed = WindowedSerdes.time_windowed_serde_from(Serdes.String(), SIZE)
        updates = driver.create_output_topic("updates", windowed, Serdes.Long())
        finals = driver.create_output_topic("finals", windowed, Serdes.Long())
        for batch in batches:
            for key, ts in batch:
                clicks.pipe_input(key, "click", ts)
            expected_updates, expected_finals = model.feed(batch)
            assert dict(updates.read_key_values_to_list()) == {
                Windowed(k, Window(s, e)): n for (k, s, e), n in expected_updates.items()
            }
            got_finals = finals.read_key_values_to_list()
            assert sorted((w.key, w.window.start, w.window.end, n) for w, n in got_finals) == [
                (*w, n) for w, n in expected_finals
            ]
        assert model.dropped == 3
        assert driver.metrics()["dropped-records-total"] == model.dropped
        # The store's changelog: key + 8-byte start + 4-byte sequence number, the latest counts.
        changelog = driver.create_output_topic(
            "test-driver-click-counts-changelog", Serdes.ByteArray(), Serdes.Long()
        )
        latest = {
            (k[:-12].decode(), int.from_bytes(k[-12:-4], "big")): n
            for k, n in changelog.read_key_values_to_list()
        }
        assert latest == {(k, s): n for (k, s, _e), n in model.counts.items()}


def test_hopping_reduce_through_the_test_driver(spark):
    size, advance = 10_000, 4_000
    builder = StreamsBuilder()
    (
        builder.stream("amounts")
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(size).advance_by(advance))
        .reduce(lambda a, b: a + b)
        .to_stream()
        .to("sums")
    )
    records = [("x", 5, 1_000), ("y", 7, 3_500), ("x", 11, 9_000), ("x", 2, 13_000), ("y", 1, 8_000)]
    config = {"default.key.serde": Serdes.String(), "default.value.serde": Serdes.Integer()}
    with TopologyTestDriver(builder.build(), config, spark=spark) as driver:
        amounts = driver.create_input_topic("amounts", Serdes.String(), Serdes.Integer())
        for key, value, ts in records:
            amounts.pipe_input(key, value, ts)
        sums = driver.create_output_topic(
            "sums", WindowedSerdes.time_windowed_serde_from(Serdes.String(), size), Serdes.Integer()
        )
        got = sums.read_key_values_to_map()
    expected: dict = {}
    stream_time = -1
    for key, value, ts in records:  # no grace: a window closes as stream time reaches its end
        stream_time = max(stream_time, ts)
        for start, end in windows_of(ts, size, advance):
            if end > stream_time:
                window = Windowed(key, Window(start, end))
                expected[window] = expected.get(window, 0) + value
    assert got == expected
    assert any(w.window.start == 4_000 for w in got)  # hopping: windows overlap


def test_session_aggregate_with_merger_through_the_test_driver(spark):
    gap = 6_000
    builder = StreamsBuilder()
    (
        builder.stream("visits")
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_and_grace(gap, 60_000))
        .aggregate(
            lambda: [],
            lambda _key, value, agg: [*agg, value],
            lambda _key, left, right: left + right,
            materialized=Materialized.with_(value_serde=Serdes.JSON()),
        )
        .to_stream()
        .to("sessions", Produced(value_serde=Serdes.JSON()))
    )
    # p@14000 bridges the sessions around 8000 and 20000 into one; q's sessions stay apart.
    first = [("p", 0), ("p", 3_000), ("p", 20_000), ("q", 1_000), ("q", 30_000), ("p", 8_000)]
    second = [("p", 14_000), ("q", 36_000)]
    with TopologyTestDriver(builder.build(), CONFIG, spark=spark) as driver:
        visits = driver.create_input_topic("visits", Serdes.String(), Serdes.String())
        out = driver.create_output_topic(
            "sessions", WindowedSerdes.session_windowed_serde_from(Serdes.String()), Serdes.JSON()
        )
        table: dict = {}
        for batch in (first, second):
            for key, ts in batch:
                visits.pipe_input(key, f"{key}{ts}", ts)
            for window, value in out.read_key_values_to_list():
                if value is None:  # a session merged into a bigger one: deleted
                    table.pop(window, None)
                else:
                    table[window] = value
    records = first + second
    expected = {
        Windowed(key, Window(start, end)): sorted(f"{key}{ts}" for ts in members)
        for key in ("p", "q")
        for start, end, members in sessions([ts for k, ts in records if k == key], gap)
    }
    assert {w: sorted(v) for w, v in table.items()} == expected
    assert Windowed("p", Window(0, 20_000)) in expected
