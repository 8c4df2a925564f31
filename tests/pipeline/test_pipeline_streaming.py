"""Streaming reads: restarts from the checkpoint without gaps or duplicates, read limits,
new partitions, and failOnDataLoss."""

from __future__ import annotations

import time

import pytest
from pipeline_kafka import create_topic, produce

pytestmark = pytest.mark.timeout(240)


def _stream(spark, broker, topic, **options):
    reader = (
        spark.readStream.format("odradek")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _collecting(df, checkpoint, sink: list, **trigger):
    def collect(batch, batch_id):
        sink.extend((batch_id, r.partition, r.offset, r.value) for r in batch.collect())

    return (
        df.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger)
        .start()
    )


def _input_rows(q) -> list[int]:
    """Rows read by each micro-batch of ``q`` that read any, from its progress reports."""
    return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]


def _wait_for(predicate, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_restart_from_checkpoint_has_no_gaps_or_duplicates(spark, broker, topic_name, tmp_path):
    create_topic(broker.bootstrap_servers, topic_name, 2)
    produce(
        broker.bootstrap_servers, topic_name, [{"partition": i % 2, "value": b"%d" % i} for i in range(200)]
    )
    got: list = []
    q = _collecting(
        _stream(spark, broker, topic_name, maxOffsetsPerTrigger="70"),
        tmp_path / "ckpt",
        got,
        processingTime="100 milliseconds",
    )
    # foreachBatch sees a batch's rows before the batch commits; its progress report comes
    # after the commit. Stopping before that report would cut the last batch short (and
    # the restart would replay it): wait for the reports of all 200 rows.
    _wait_for(lambda: sum(_input_rows(q)) >= 200, what="progress reports of the first 200 records")
    q.stop()
    sizes = _input_rows(q)
    assert max(sizes) <= 70 and sum(sizes) == 200

    produce(
        broker.bootstrap_servers,
        topic_name,
        [{"partition": i % 2, "value": b"%d" % i} for i in range(200, 350)],
    )
    q = _collecting(
        _stream(spark, broker, topic_name, maxOffsetsPerTrigger="70"),
        tmp_path / "ckpt",
        got,
        availableNow=True,
    )
    q.awaitTermination(120)
    assert q.exception() is None

    seen = [(p, o) for _, p, o, _ in got]
    assert len(seen) == len(set(seen)) == 350, "duplicates or gaps across the restart"
    for p in (0, 1):
        assert sorted(o for pp, o in seen if pp == p) == list(range(175))
    assert sorted(int(v) for *_, v in got) == list(range(350))
    batch_ids = sorted({b for b, *_ in got})
    assert batch_ids == list(range(len(batch_ids)))  # the restart continued the batch ids


def test_new_partitions_are_picked_up(spark, broker, topic_name, tmp_path):
    from confluent_kafka.admin import AdminClient, NewPartitions

    create_topic(broker.bootstrap_servers, topic_name, 1)
    produce(broker.bootstrap_servers, topic_name, [{"value": b"a%d" % i} for i in range(10)])
    got: list = []
    q = _collecting(
        _stream(spark, broker, topic_name), tmp_path / "ckpt", got, processingTime="100 milliseconds"
    )
    try:
        _wait_for(lambda: len(got) >= 10, what="the first records")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_partitions([NewPartitions(topic_name, 3)])[topic_name].result(30)
        produce(
            broker.bootstrap_servers,
            topic_name,
            [{"partition": p, "value": b"p%d-%d" % (p, i)} for p in (1, 2) for i in range(5)],
        )
        _wait_for(lambda: len(got) >= 20, what="records of the new partitions")
    finally:
        q.stop()
    assert sorted((p, o) for _, p, o, _ in got) == [(0, o) for o in range(10)] + [
        (p, o) for p in (1, 2) for o in range(5)
    ]


def test_fail_on_data_loss_when_retention_removed_unread_records(spark, broker, topic_name, tmp_path):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    create_topic(broker.bootstrap_servers, topic_name, 1)
    produce(broker.bootstrap_servers, topic_name, [{"value": b"%d" % i} for i in range(50)])
    got: list = []
    q = _collecting(_stream(spark, broker, topic_name), tmp_path / "ckpt", got, availableNow=True)
    q.awaitTermination(120)
    assert len(got) == 50

    produce(broker.bootstrap_servers, topic_name, [{"value": b"%d" % i} for i in range(50, 100)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for f in admin.delete_records([TopicPartition(topic_name, 0, 80)]).values():
        f.result(30)

    q = _collecting(_stream(spark, broker, topic_name), tmp_path / "ckpt", got, availableNow=True)
    with pytest.raises(Exception, match="failOnDataLoss"):
        q.awaitTermination(120)
    assert len(got) == 50

    q = _collecting(
        _stream(spark, broker, topic_name, failOnDataLoss="false"), tmp_path / "ckpt", got, availableNow=True
    )
    q.awaitTermination(120)
    assert q.exception() is None
    assert [o for _, _, o, _ in got] == list(range(50)) + list(range(80, 100))


def test_admission_control_and_available_now_target(broker, topic_name):
    """The stream reader's offset logic alone, as Spark's driver calls it."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

    from odradek.pipeline.options import read_options
    from odradek.pipeline.source import StreamReader

    create_topic(broker.bootstrap_servers, topic_name, 2)
    produce(broker.bootstrap_servers, topic_name, [{"partition": i % 2, "value": b"x"} for i in range(100)])

    def reader(**options):
        opts = {"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": topic_name}
        return StreamReader(read_options({**opts, **options}, streaming=True))

    r = reader(startingOffsets="earliest", maxOffsetsPerTrigger="30")
    start = r.initialOffset()
    assert start == {topic_name: {"0": 0, "1": 0}}
    assert r.getDefaultReadLimit() == ReadMaxRows(30)
    end = r.latestOffset(start, ReadMaxRows(30))
    assert sum(end[topic_name].values()) == 30
    assert r.latestOffset(start, ReadAllAvailable()) == {topic_name: {"0": 50, "1": 50}}
    assert len(r.partitions(start, end)) == 2
    assert reader(startingOffsets="latest").initialOffset() == {topic_name: {"0": 50, "1": 50}}

    lazy = reader(startingOffsets="earliest", minOffsetsPerTrigger="500", maxTriggerDelay="1h")
    assert lazy.getDefaultReadLimit() == ReadMinRows(500)
    first = lazy.initialOffset()
    assert lazy.latestOffset(first, ReadMinRows(500)) == first  # not enough yet: wait
    assert lazy.latestOffset(first, ReadMinRows(100)) == {topic_name: {"0": 50, "1": 50}}

    now = reader(startingOffsets="earliest")
    now.prepareForTriggerAvailableNow()
    produce(broker.bootstrap_servers, topic_name, [{"partition": 0, "value": b"late"}] * 10)
    assert now.latestOffset(now.initialOffset(), ReadAllAvailable()) == {topic_name: {"0": 50, "1": 50}}
    r.stop()
    lazy.stop()
    now.stop()
