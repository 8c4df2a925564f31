"""A windowed count with grace and suppression, run by KafkaStreams (test_joins_broker.py runs it
on a broker and on a 3-broker cluster): the final counts read back with confluent-kafka and decoded as a Java consumer's TimeWindowedDeserializer would (key bytes + 8-byte window start), each window once,
checked record by record against an independent model (windows_model.py); late records dropped
and counted in metrics(); the store's changelog topic named as Kafka Streams names it. The same app
counts the same records in sliding windows (SlidingWindows, suppressed) beside it."""

from __future__ import annotations

import struct
import time

from pipeline_kafka import create_topic, produce, read_topic
from support import wait_until
from windows_model import CountModel, SlidingModel, decode_time_windowed

from odradek.streams import (
    BufferConfig,
    KafkaStreams,
    Materialized,
    Produced,
    Serdes,
    SlidingWindows,
    State,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
)
from odradek.streams.windowed import WindowedSerdes

SIZE, GRACE = 10_000, 5_000
SLIDING = 4_000  # the sliding windows' time difference: every record on time or late for all its windows
# Recent timestamps (records far in the past would meet the brokers' retention).
BASE = (int(time.time() * 1000) // SIZE - 360) * SIZE
OFFSETS = [
    ("a", 1_000),
    ("b", 2_000),
    ("a", 12_000),
    ("a", 8_000),  # out of order, within the grace period
    ("b", 16_000),  # closes [0, 10 s)
    ("a", 3_000),  # late: dropped
    ("b", 11_000),
    ("c", 24_000),
    ("a", 14_000),  # late for nothing: [10 s, 20 s) is open until 25 s
    ("b", 9_000),  # late: dropped
    ("c", 60_000),  # closes every window before 45 s
]


def run_windowed_count(spark, bootstrap: str, name: str, state_dir, **config) -> None:
    source, target = f"{name}-in", f"{name}-out"
    create_topic(bootstrap, source, 1, replication_factor=config.get("replication.factor", 1))
    produce(
        bootstrap,
        source,
        [{"key": k.encode(), "value": b"click", "timestamp": BASE + ts} for k, ts in OFFSETS],
    )
    model = CountModel(SIZE, GRACE)
    _updates, expected = model.feed([(k, BASE + ts) for k, ts in OFFSETS])
    sliding = SlidingModel(SLIDING, GRACE)
    _updates, sliding_expected = sliding.feed([(k, BASE + ts, None) for k, ts in OFFSETS])

    builder = StreamsBuilder()
    grouped = builder.stream(source).group_by_key()
    (
        grouped.windowed_by(SlidingWindows.of_time_difference_and_grace(SLIDING, GRACE))
        .count()
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .to(
            f"{name}-sliding",
            Produced(
                key_serde=WindowedSerdes.time_windowed_serde_from(Serdes.String(), SLIDING),
                value_serde=Serdes.Long(),
            ),
        )
    )
    (
        grouped.windowed_by(TimeWindows.of_size_and_grace(SIZE, GRACE))
        .count(Materialized.as_("clicks-per-window"))
        .suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
        .to_stream()
        .to(
            target,
            Produced(
                key_serde=WindowedSerdes.time_windowed_serde_from(Serdes.String(), SIZE),
                value_serde=Serdes.Long(),
            ),
        )
    )
    app_id = f"{name}-app"
    streams = KafkaStreams(
        builder.build(),
        {
            "application.id": app_id,
            "bootstrap.servers": bootstrap,
            "default.key.serde": Serdes.String(),
            "default.value.serde": Serdes.String(),
            "commit.interval.ms": 200,
            "state.dir": str(state_dir),
            **config,
        },
    )

    def finals():
        assert streams.state() is State.RUNNING, streams.exception
        return read_topic(bootstrap, target)

    streams.start()
    try:
        wait_until(lambda: len(finals()) >= len(expected), 420, f"{len(expected)} final counts")
        wait_until(
            lambda: len(read_topic(bootstrap, f"{name}-sliding")) >= len(sliding_expected),
            120,
            f"{len(sliding_expected)} final sliding counts",
        )
        assert model.dropped == 2 and sliding.dropped == 3
        assert streams.metrics()["dropped-records-total"] == model.dropped + sliding.dropped
        check_window_store(streams.store("clicks-per-window"), model)
    finally:
        assert streams.close(60)
    got = [
        (*decode_time_windowed(r.key), struct.unpack(">q", r.value)[0]) for r in read_topic(bootstrap, target)
    ]
    # Each window once (suppressed), with its final count.
    assert sorted(got) == [(k, start, n) for (k, start, _end), n in expected]
    sliding_got = [
        (*decode_time_windowed(r.key), struct.unpack(">q", r.value)[0])
        for r in read_topic(bootstrap, f"{name}-sliding")
    ]
    assert sorted(sliding_got) == [(k, start, n) for (k, start, _end), n in sliding_expected]
    # The store's changelog topic, named as Kafka Streams names it: key + 8-byte start + 4-byte
    # sequence number, the latest count of every window.
    changelog = read_topic(bootstrap, f"{app_id}-clicks-per-window-changelog")
    latest = {(r.key[:-12].decode(), int.from_bytes(r.key[-12:-4], "big")): struct.unpack(">q", r.value)[0]
              for r in changelog}  # fmt: skip
    assert latest == {(k, start): n for (k, start, _end), n in model.counts.items()}


def check_window_store(store, model: CountModel) -> None:
    """Interactive queries on the windowed store (ReadOnlyWindowStore, read from its changelog)
    answer what the model counted: every window, one key's windows, one window, a time range."""
    counts = {(k, start): n for (k, start, _end), n in model.counts.items()}

    def entries(found):
        return [(e.key.key, e.key.window.start, e.key.window.end, e.value) for e in found]

    wait_until(lambda: len(list(store.all())) == len(counts), 60, "every window in the window store")
    by_start = sorted(counts.items(), key=lambda item: (item[0][1], item[0][0]))
    assert entries(store.all()) == [(k, start, start + SIZE, n) for (k, start), n in by_start]
    for key in ("a", "b", "c", "absent"):
        mine = sorted((start, n) for (k, start), n in counts.items() if k == key)
        assert [tuple(e) for e in store.fetch(key, BASE, BASE + 60_000)] == mine
    assert store.fetch("a", BASE) == counts[("a", BASE)] == 2  # 1 s and 8 s (3 s was late)
    assert store.fetch("a", BASE + SIZE) == counts[("a", BASE + SIZE)] == 2
    assert store.fetch("a", BASE + 2 * SIZE) is None  # no such window
    middle = [(k, s, s + SIZE, n) for (k, s), n in by_start if SIZE <= s - BASE <= 2 * SIZE]
    assert entries(store.fetch_all(BASE + SIZE, BASE + 2 * SIZE)) == middle  # bounds inclusive
    assert middle and entries(store.fetch_range("b", "c", BASE, BASE + 60_000)) == [
        (k, s, s + SIZE, n) for (k, s), n in by_start if k in "bc"
    ]
