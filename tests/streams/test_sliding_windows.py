"""Sliding windows (``windowed_by(SlidingWindows...)``), checked against the brute-force model of
KIP-450 in windows_model.py: the window processor alone on random streams (every window Kafka
creates, its start, end and value, batch by batch; out-of-order records, records before the time
difference, equal timestamps, late records dropped and counted), a record late for some of its
windows only (traced through Kafka's KStreamSlidingWindowAggregate by hand), and the DSL through
the TopologyTestDriver: count with suppression, an order-sensitive aggregate, the changelog and
dropped-records-total, and describe() naming the processor and store as Kafka does."""

from __future__ import annotations

import random

import pytest
from windows_model import SlidingModel, decode_time_windowed

from odradek.streams import (
    BufferConfig,
    Materialized,
    Produced,
    Serdes,
    SlidingWindows,
    StreamsBuilder,
    Suppressed,
    TopologyTestDriver,
)
from odradek.streams.window_state import (
    WindowDef,
    aggregate_folder,
    count_folder,
    new_state,
    process,
    reduce_folder,
)
from odradek.streams.windowed import Window, Windowed, WindowedSerdes

pytestmark = pytest.mark.timeout(600)


def _random_stream(rng: random.Random, d: int, grace: int, n: int) -> list[tuple[str, int, str]]:
    """Records mostly in order, some out of order within the grace period, some before d, some
    late for every window; none late for some windows only (the model's limit)."""
    out: list[tuple[str, int, str]] = []
    stream_time = -1
    t = rng.randrange(0, d + 1)
    for i in range(n):
        close = stream_time - grace
        roll = rng.random()
        if roll < 0.1 and close - d - 1 >= 0:
            ts = rng.randrange(0, close - d)  # late for every window
        elif roll < 0.35 and stream_time >= 0:
            ts = rng.randrange(max(0, close), stream_time + 1)  # out of order, within grace
        else:
            t += rng.choice([0, 1, 2, d // 2, d, d + 1, d + 2, 2 * d])
            ts = t
        if close - d <= ts < close:
            continue
        stream_time = max(stream_time, ts)
        out.append((rng.choice("ab"), ts, f"v{i}"))
    return out


def _run_processor(windows: WindowDef, folder, model: SlidingModel, records, rng: random.Random) -> None:
    state = new_state()
    dropped = 0
    table: dict = {}
    i = 0
    while i < len(records):
        batch = records[i : i + rng.randint(1, 4)]
        i += len(batch)
        step = process(
            state,
            windows,
            folder,
            [(k.encode(), v, ts, k) for k, ts, v in batch],
            final_results=True,
        )
        expected_updates, expected_finals = model.feed(batch)
        got = {(k.decode(), s, e): entry[0] for (k, s, e), entry in step.updates.items()}
        assert got == expected_updates, (batch, state)
        got_finals = sorted(((k.decode(), s, e), agg) for (k, s, e), agg, _ts in step.finals)
        assert got_finals == expected_finals
        dropped += sum(missed for _k, _ts, missed in step.late)
        table.update(got)
    assert dropped == model.dropped
    assert table == model.table()  # every window Kafka creates, and nothing else


@pytest.mark.parametrize("fold", ["count", "aggregate", "aggregate-in-place", "reduce"])
def test_sliding_processor_matches_the_model_on_random_streams(fold):
    rng = random.Random(f"sliding-{fold}")
    for _ in range(150):
        d, grace = rng.choice([(10, 0), (10, 6), (5, 20), (1, 3), (0, 2)])
        records = _random_stream(rng, d, grace, rng.randint(1, 40))
        if fold == "count":
            folder, model = count_folder(), SlidingModel(d, grace)
        elif fold == "aggregate":  # order-sensitive: the window's values in processing order
            folder = aggregate_folder(lambda: [], lambda _k, v, agg: [*agg, v], None)
            model = SlidingModel(d, grace, list, lambda agg, v: [*agg, v])
        elif fold == "aggregate-in-place":  # an aggregator that appends to its aggregate
            folder = aggregate_folder(lambda: [], lambda _k, v, agg: agg.append(v) or agg, None)
            model = SlidingModel(d, grace, list, lambda agg, v: [*agg, v])
        else:
            folder = reduce_folder(lambda a, b: f"{a},{b}")
            model = SlidingModel(d, grace, lambda: None, lambda agg, v: v if agg is None else f"{agg},{v}")
        _run_processor(WindowDef("sliding", d, grace), folder, model, records, rng)


def test_a_record_late_for_some_of_its_windows():
    # d = 10, no grace. At 111 stream time is 120: 111's own window [101, 111] and the right
    # window of 105, [106, 116], have closed (two dropped records), while [110, 120] takes it and
    # its right window [112, 122] starts with 120's count (Kafka's KStreamSlidingWindowAggregate).
    state = new_state()
    windows = WindowDef("sliding", 10, 0)
    steps = [
        process(state, windows, count_folder(), [(b"k", None, ts, None)], final_results=True)
        for ts in (100, 105, 120, 111)
    ]
    assert [sorted((w[1], w[2], e[0]) for w, e in s.updates.items()) for s in steps] == [
        [(90, 100, 1)],
        [(95, 105, 2), (101, 111, 1)],
        [(110, 120, 1)],
        [(110, 120, 2), (112, 122, 1)],
    ]
    assert [s.late for s in steps][3] == [(b"k", 111, 2)]
    assert [[(w[1], agg) for w, agg, _ in s.finals] for s in steps] == [
        [],
        [(90, 1)],
        [(95, 2), (101, 1)],
        [],
    ]


D, GRACE = 10_000, 5_000
CONFIG = {"default.key.serde": Serdes.String(), "default.value.serde": Serdes.String()}
WINDOWED = WindowedSerdes.time_windowed_serde_from(Serdes.String(), D)


def _topology():
    """One sliding aggregation (the window's values, in order): its updates and, suppressed, its
    final values."""
    builder = StreamsBuilder()
    lists = (
        builder.stream("clicks")
        .group_by_key()
        .windowed_by(SlidingWindows.of_time_difference_and_grace(D, GRACE))
        .aggregate(
            lambda: [],
            lambda _k, v, agg: [*agg, v],
            materialized=Materialized.as_("slide-lists").with_value_serde(Serdes.JSON()),
        )
    )
    lists.to_stream().to("updates", Produced(key_serde=WINDOWED, value_serde=Serdes.JSON()))
    (
        lists.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .to("finals", Produced(key_serde=WINDOWED, value_serde=Serdes.JSON()))
    )
    return builder.build()


def test_describe_names_the_sliding_aggregation_as_kafka():
    text = str(_topology().describe())
    # Kafka's SlidingWindowedKStreamImpl names its processor and store as the time-windowed ones.
    assert "Processor: KSTREAM-AGGREGATE-0000000001 (stores: [slide-lists])" in text
    assert "      --> KTABLE-SUPPRESS-0000000004, KTABLE-TOSTREAM-0000000002\n" in text
    assert "Processor: KTABLE-SUPPRESS-0000000004 (stores: [KTABLE-SUPPRESS-STATE-STORE-0000000005])" in text
    builder = StreamsBuilder()
    windowed = (
        builder.stream("s").group_by_key().windowed_by(SlidingWindows.of_time_difference_with_no_grace(D))
    )
    windowed.count().to_stream().to("t")
    assert (
        "Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])"
        in str(builder.build().describe())
    )
    with pytest.raises(ValueError, match="must not be negative"):
        SlidingWindows.of_time_difference_and_grace(-1, 0)
    with pytest.raises(ValueError, match="grace"):
        SlidingWindows.of_time_difference_and_grace(1, -1)
    assert SlidingWindows.of_time_difference_with_no_grace(D) == SlidingWindows(D, 0)


def test_sliding_aggregate_and_final_results_through_the_test_driver(spark):
    batches = [
        # before d (windows [0, d] and right windows), then out of order within the grace period
        [
            ("b", 2_000),
            ("a", 3_000),
            ("a", 8_000),
            ("a", 14_000),
            ("a", 11_000),
            ("a", 12_000),
            ("b", 16_000),
        ],
        # a@13000: late (13000 + d < 30000 - grace); c@60000 closes every window of a and b
        [("b", 30_000), ("a", 13_000), ("a", 27_000), ("a", 36_000), ("c", 60_000)],
    ]
    model = SlidingModel(D, GRACE, list, lambda agg, v: [*agg, v])
    with TopologyTestDriver(_topology(), CONFIG, spark=spark) as driver:
        clicks = driver.create_input_topic("clicks", Serdes.String(), Serdes.String())
        updates = driver.create_output_topic("updates", WINDOWED, Serdes.JSON())
        finals = driver.create_output_topic("finals", WINDOWED, Serdes.JSON())
        for batch in batches:
            records = [(k, ts, f"{k}{ts}") for k, ts in batch]
            for key, ts, value in records:
                clicks.pipe_input(key, value, ts)
            expected_updates, expected_finals = model.feed(records)
            assert dict(updates.read_key_values_to_list()) == {
                Windowed(k, Window(s, e)): v for (k, s, e), v in expected_updates.items()
            }
            got_finals = finals.read_key_values_to_list()
            assert sorted((w.key, w.window.start, w.window.end, v) for w, v in got_finals) == [
                (*w, v) for w, v in expected_finals
            ]
        # Each window of a and b came out once, with its final value.
        assert model.emitted == {w for w in model.table() if w[0] != "c"}
        assert {("a", 0, D), ("a", 3_001, 13_001), ("a", 27_001, 37_001)} <= model.emitted
        assert model.dropped == 1
        assert driver.metrics()["dropped-records-total"] == 1
        changelog = driver.create_output_topic(
            "test-driver-slide-lists-changelog", Serdes.ByteArray(), Serdes.JSON()
        )
        latest = {decode_time_windowed(k[:-4]): v for k, v in changelog.read_key_values_to_list()}
        assert latest == {(k, s): v for (k, s, _e), v in model.table().items()}
