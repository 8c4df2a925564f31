"""The seeds' three pipelines, each run on the test SparkSession against the broker and
its output checked record by record against what the input implies."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime

import pytest
from pipeline_kafka import check_page_views, create_topic, produce, read_topic, user_headers

from odradek.pipeline.pipelines import offline_load, page_view_events
from odradek.pipeline.pipelines.run_config import RunConfig
from odradek.pipeline.publish import Publisher
from odradek.streams.apps import page_views, value_length

pytestmark = pytest.mark.timeout(240)


def _config(broker, tmp_path) -> RunConfig:
    return RunConfig(
        bootstrap_servers=broker.bootstrap_servers, checkpoint=str(tmp_path / "ckpt"), available_now=True
    )


def _finish(queries) -> None:
    for q in queries:
        q.awaitTermination(180)
        assert q.exception() is None, q.exception()


def test_value_length_is_the_streams_example(spark, broker, topic_name, tmp_path):
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(broker.bootstrap_servers, source, 2)
    create_topic(broker.bootstrap_servers, target, 2)
    values = ["", "a", "hello", "ünïcödé", "日本語のテキスト", "x" * 1000, None]
    sent = [
        {"key": f"user-{i % 5}".encode(), "value": None if v is None else v.encode()}
        for i, v in enumerate(values * 20)
    ]
    produce(broker.bootstrap_servers, source, sent)
    _finish(value_length.start(spark, _config(broker, tmp_path), input_topic=source, output_topic=target))

    inputs = read_topic(broker.bootstrap_servers, source)
    out = read_topic(broker.bootstrap_servers, target)
    expected = Counter(
        (r.key, None if r.value is None else str(len(r.value.decode())).encode()) for r in inputs
    )
    assert Counter((r.key, r.value) for r in out) == expected
    assert all(user_headers(r) == () for r in out)
    # mapValues keeps each key's order: per key, the lengths come out as they went in
    for key in {r.key for r in inputs}:
        want = [
            None if r.value is None else str(len(r.value.decode())).encode() for r in inputs if r.key == key
        ]
        assert [r.value for r in out if r.key == key] == want


def test_page_views_per_minute_and_top_pages(spark, broker, topic_name, tmp_path):
    events_topic, minute_topic, top_topic = f"{topic_name}-ev", f"{topic_name}-min", f"{topic_name}-top"
    create_topic(broker.bootstrap_servers, events_topic, 3)
    create_topic(broker.bootstrap_servers, minute_topic, 2)
    create_topic(broker.bootstrap_servers, top_topic, 1, {"cleanup.policy": "compact"})
    t0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    page_view_events.generate(
        broker.bootstrap_servers, events_topic, rate=0, count=600, seed=7, pages=12, start_ms=t0, step_ms=300
    )  # three minutes of events
    late = {"event_id": "late", "user": "u1", "page": "/page/0", "action": "view", "ts": t0 + 10 * 60_000}
    with Publisher(broker.bootstrap_servers, events_topic) as pub:
        pub.send(json.dumps(late).encode(), key=b"u1")
    events = list(page_view_events.events(600, seed=7, pages=12, start_ms=t0, step_ms=300)) + [late]

    queries = page_views.start(
        spark,
        _config(broker, tmp_path),
        input_topic=events_topic,
        output_topic=minute_topic,
        top_topic=top_topic,
        top_n=5,
    )
    _finish(queries)

    # Per minute: stream time (10 min) passed the ends plus the grace (1 min) of minutes 0-2, not
    # of minute 10.
    check_page_views(
        broker.bootstrap_servers, events, minute_topic, top_topic, 5, closed_before=t0 + 9 * 60_000
    )


def test_offline_load_resumes_where_it_stopped(spark, broker, topic_name, tmp_path):
    create_topic(broker.bootstrap_servers, topic_name, 2)
    day = 86_400_000
    t0 = 1_767_225_600_000  # 2026-01-01
    first = [{"key": b"k%d" % i, "value": b"v%d" % i, "timestamp": t0 + (i % 3) * day + i} for i in range(90)]
    produce(broker.bootstrap_servers, topic_name, first)
    path = tmp_path / "warehouse"
    config = _config(broker, tmp_path)
    _finish(
        offline_load.start(
            spark, config, input_topic=topic_name, output_path=str(path), max_records_per_batch=40
        )
    )

    def table():
        rows = spark.read.parquet(str(path)).collect()
        return sorted(rows, key=lambda r: (r.partition, r.offset))

    rows = table()
    truth = read_topic(broker.bootstrap_servers, topic_name)
    assert [(r.partition, r.offset, r.key, r.value) for r in rows] == [
        (t.partition, t.offset, t.key.decode(), t.value.decode()) for t in truth
    ]
    for r, t in zip(rows, truth, strict=True):
        assert str(r.date) == datetime.fromtimestamp(t.timestamp / 1000, UTC).strftime("%Y-%m-%d")
    assert sorted(p.name for p in path.iterdir() if p.name.startswith("date=")) == [
        "date=2026-01-01",
        "date=2026-01-02",
        "date=2026-01-03",
    ]

    produce(
        broker.bootstrap_servers,
        topic_name,
        [{"key": b"n%d" % i, "value": b"new", "timestamp": t0 + 3 * day} for i in range(25)],
    )
    _finish(offline_load.start(spark, config, input_topic=topic_name, output_path=str(path)))
    rows = table()
    assert len(rows) == 115 and len({(r.partition, r.offset) for r in rows}) == 115
    assert sum(1 for r in rows if str(r.date) == "2026-01-04") == 25
