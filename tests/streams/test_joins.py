"""KStream-KStream windowed joins on a real SparkSession, fed one file per micro-batch on each
side, checked against a brute-force computation: records join within the time difference, late
records are dropped, left/outer results for unmatched records come once, after their window closed."""

from __future__ import annotations

import json
import os

import pytest

from odradek.streams.spark_joins import JoinSpec, stream_stream_join

pytestmark = pytest.mark.timeout(600)  # queries of several micro-batches: slow on a loaded machine

LEFT = [
    [("k1", "a", 1_000), ("k2", "b", 5_000), ("k3", "c", 20_000)],
    [("k9", "end", 100_000)],
    [("k8", "q", 100_500)],  # its window never closes in this run
]
RIGHT = [
    [("k1", "x", 2_500), ("k2", "y", 9_000), ("k3", "z", 19_000)],  # k2: 4 s apart, no match
    [("k9", "end2", 100_000)],
    [("k1", "late", 1_500)],  # within 2 s of k1/a, but late: stream time is far ahead
]
SPEC = JoinSpec(before_ms=2_000, after_ms=2_000, grace_ms=1_000)


def expected(how):
    """Brute force. A batch's records are late when older than the watermark of the batch before
    (Spark moves it between micro-batches: the smaller side's largest time, two batches back, minus
    the grace); unmatched records come out once the final watermark passes their window."""

    def side_max(batches, upto):
        return max([ts for b in batches[:upto] for _, _, ts in b], default=-(2**62))

    def live(batches):
        out = []
        for k, batch in enumerate(batches):
            before = max(k - 1, 0)  # the batches before the previous one
            late_wm = min(side_max(LEFT, before), side_max(RIGHT, before)) - SPEC.grace_ms
            out += [r for r in batch if r[2] > late_wm]
        return out

    lefts, rights = live(LEFT), live(RIGHT)
    final_wm = min(side_max(LEFT, len(LEFT)), side_max(RIGHT, len(RIGHT))) - SPEC.grace_ms
    rows = set()
    matched_l, matched_r = set(), set()
    for lk, lv, lt in lefts:
        for rk, rv, rt in rights:
            if lk == rk and lt - SPEC.before_ms <= rt <= lt + SPEC.after_ms:
                rows.add((lk, lv, rv, max(lt, rt)))
                matched_l.add((lk, lv, lt))
                matched_r.add((rk, rv, rt))
    if how in ("left", "outer"):
        rows |= {
            (k, v, None, t)
            for k, v, t in lefts
            if (k, v, t) not in matched_l and t + SPEC.after_ms < final_wm
        }
    if how == "outer":
        rows |= {
            (k, None, v, t)
            for k, v, t in rights
            if (k, v, t) not in matched_r and t + SPEC.before_ms < final_wm
        }
    return rows


def file_stream(spark, folder, batches):
    from pyspark.sql import functions as F

    folder.mkdir()
    for i, batch in enumerate(batches):
        path = folder / f"{i:03}.json"
        path.write_text("".join(json.dumps({"key": k, "value": v, "ts": ts}) + "\n" for k, v, ts in batch))
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))  # the file source reads by mtime
    raw = spark.readStream.schema("key string, value string, ts long").option("maxFilesPerTrigger", 1)
    return raw.json(str(folder)).withColumn("timestamp", F.timestamp_millis("ts")).drop("ts")


@pytest.mark.parametrize("how", ["inner", "left", "outer"])
def test_windowed_join_matches_the_brute_force(spark, tmp_path, how):
    left, right = file_stream(spark, tmp_path / "left", LEFT), file_stream(spark, tmp_path / "right", RIGHT)
    rows: list = []
    query = (
        stream_stream_join(left, right, SPEC, how)
        .writeStream.outputMode("append")
        .foreachBatch(lambda out, _id: rows.extend(tuple(r) for r in out.collect()))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(500)
    assert query.exception() is None
    got = [(k, lv, rv, int(ts.timestamp() * 1000)) for k, lv, rv, ts in rows]
    assert len(got) == len(set(got))  # each result once
    assert set(got) == expected(how)
    assert ("k1", "a", "late", 1_500) not in set(got)


def test_join_spec_refuses_negative_windows_and_unknown_types(spark):
    with pytest.raises(ValueError, match=">= 0"):
        JoinSpec(-1, 0, 0)
    df = spark.createDataFrame([], "key string, value string, timestamp timestamp")
    with pytest.raises(ValueError, match="inner, left, outer"):
        stream_stream_join(df, df, SPEC, "cross")
