"""Windowed aggregations on a real SparkSession, fed one file per micro-batch, checked against an
independent model of Kafka Streams' windowing: out-of-order records within the grace period count,
later ones are dropped and counted, suppressed results come once per window after the grace period."""

from __future__ import annotations

import json
import os

import pytest

from odradek.streams.spark_windows import WindowSpec, dropped_late_records, output_mode, windowed_aggregate

pytestmark = pytest.mark.timeout(600)  # queries of several micro-batches: slow on a loaded machine

# Micro-batches of (key, value, timestamp ms), one file each.
BATCHES = [
    [("a", 1, 1_000), ("b", 2, 2_000), ("a", 3, 12_000)],
    [("a", 4, 8_000), ("b", 5, 25_000)],  # a@8000 is out of order, within the grace
    [("b", 6, 22_000)],
    [("a", 7, 9_000), ("a", 8, 14_000), ("b", 9, 21_000)],  # a@9000 and a@14000 are late
    [("c", 10, 100_000)],  # moves stream time far ahead: every earlier window closes
]
SIZE, GRACE = 10_000, 5_000


def late_close_times():
    """The close time each batch's records are judged against. Kafka judges a record against the
    stream time of the records before it; Spark moves stream time between micro-batches and judges
    a batch's records against the watermark of the batch before (one trigger behind): the largest
    timestamp of the batches before the previous one, minus the grace."""
    seen = [-(2**62)]
    for batch in BATCHES:
        seen.append(max([seen[-1]] + [ts for _, _, ts in batch]))
    return [seen[max(k - 1, 0)] - GRACE for k in range(len(BATCHES))], seen[-1]


def spark_time_windows(size, advance, fold):
    """Windows [s, s+size) every ``advance``: a record joins each window holding it whose end is
    after its batch's close time. ({(key, start, end): value}, records dropped, final stream time)."""
    result: dict = {}
    dropped = 0
    close_times, stream_time = late_close_times()
    for batch, close_time in zip(BATCHES, close_times, strict=True):
        for key, value, ts in batch:
            starts = range(ts - ts % advance - size + advance, ts + 1, advance)
            windows = [(s, s + size) for s in starts if s >= 0 and s <= ts < s + size]
            if all(end <= close_time for _, end in windows):
                dropped += 1
            for start, end in windows:
                if end > close_time:
                    result[(key, start, end)] = fold(result.get((key, start, end)), value)
    return result, dropped, stream_time


@pytest.fixture
def source(spark, tmp_path):
    """The batches as a file stream, one file per micro-batch."""
    from pyspark.sql import functions as F

    folder = tmp_path / "in"
    folder.mkdir()
    for i, batch in enumerate(BATCHES):
        lines = [
            json.dumps({"key": k, "value": v, "ts": ts, "order": 100 * i + n})
            for n, (k, v, ts) in enumerate(batch)
        ]
        path = folder / f"{i:03}.json"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # the file source reads by mtime
    raw = spark.readStream.schema("key string, value long, ts long, order long").option(
        "maxFilesPerTrigger", 1
    )
    return raw.json(str(folder)).withColumn("timestamp", F.timestamp_millis("ts")).drop("ts")


def run(df, mode, tmp_path):
    """Runs to the end of the input; ([rows of each batch], query)."""
    batches: list[list] = []
    query = (
        df.writeStream.outputMode(mode)
        .foreachBatch(lambda out, _id: batches.append([tuple(r) for r in out.collect()]))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(500)
    assert query.exception() is None
    return batches, query


def latest(batches):
    table = {}
    for rows in batches:
        for key, start, end, value in rows:
            table[(key, start, end)] = value
    return table


def count(agg, _value):
    return (agg or 0) + 1


def test_tumbling_count_emits_updates_and_drops_late_records(source, tmp_path):
    spec = WindowSpec("time", SIZE, GRACE)
    batches, query = run(windowed_aggregate(source, spec), output_mode(False), tmp_path)
    expected, dropped, _ = spark_time_windows(SIZE, SIZE, count)
    assert latest(batches) == expected
    assert dropped == 2 and dropped_late_records(query) == dropped
    assert late_close_times()[0][3] == 20_000  # a@14000's window [10000, 20000) had closed
    # Updates: the first batch already shows a@[0,10000) = 1; it becomes 2 later.
    assert ("a", 0, 10_000, 1) in batches[0]


def test_suppressed_count_emits_each_closed_window_once(source, tmp_path):
    spec = WindowSpec("time", SIZE, GRACE)
    batches, _ = run(windowed_aggregate(source, spec), output_mode(True), tmp_path)
    rows = [row for rows in batches for row in rows]
    expected, _, stream_time = spark_time_windows(SIZE, SIZE, count)
    closed = {k: v for k, v in expected.items() if k[2] <= stream_time - GRACE}
    assert sorted(rows) == sorted((k, s, e, v) for (k, s, e), v in closed.items())
    assert len(rows) == len({r[:3] for r in rows})  # once per window
    assert ("c", 100_000, 110_000) not in {r[:3] for r in rows}  # still open


def test_hopping_reduce_folds_in_processing_order(source, tmp_path):
    from pyspark.sql.types import LongType

    spec = WindowSpec("time", SIZE, GRACE, advance_ms=5_000)
    df = windowed_aggregate(source, spec, reducer=lambda agg, v: agg * 10 + v, result_type=LongType())
    batches, query = run(df, output_mode(False), tmp_path)
    expected, dropped, _ = spark_time_windows(SIZE, 5_000, lambda agg, v: v if agg is None else agg * 10 + v)
    assert latest(batches) == expected
    assert expected[("a", 0, 10_000)] == 14  # 1 then 4: the order the records came in
    assert dropped_late_records(query) >= dropped


def test_session_count_ends_sessions_at_their_last_record(source, tmp_path):
    spec = WindowSpec("session", 5_000, GRACE)
    batches, _ = run(windowed_aggregate(source, spec), output_mode(True), tmp_path)
    rows = sorted(row for rows in batches for row in rows)
    # Sessions with a 5 s gap and 5 s grace, by hand from BATCHES: a: 1000 alone (8000 is 7 s
    # later), a: 8000-12000 (9000 and 14000 come when their sessions would end before the
    # close time, 20000: dropped), b: 2000 alone, b: 21000-25000 (three records); c stays open.
    assert rows == [
        ("a", 1_000, 1_000, 1),
        ("a", 8_000, 12_000, 2),
        ("b", 2_000, 2_000, 1),
        ("b", 21_000, 25_000, 3),
    ]


def test_window_specs_refuse_nonsense():
    with pytest.raises(ValueError, match="advance"):
        WindowSpec("time", 10, 0, advance_ms=20)
    with pytest.raises(ValueError, match="kind"):
        WindowSpec("sliding", 10, 0)
    assert output_mode(True) == "append" and output_mode(False) == "update"
