"""Batch reads and writes through Spark against a real broker, checked record by record
with confluent-kafka on the other side."""

from __future__ import annotations

import time

import pytest
from pipeline_kafka import create_topic, produce, read_topic

from odradek.client.producer.partitioner import murmur2

pytestmark = pytest.mark.timeout(240)


def _load(spark, broker, **options):
    reader = spark.read.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _rows(df):
    from pyspark.sql import functions as F

    out = df.select(
        "partition",
        "offset",
        "key",
        "value",
        "topic",
        "timestampType",
        F.unix_millis("timestamp").alias("ms"),
        *(["headers"] if "headers" in df.columns else []),
    ).collect()
    return sorted(out, key=lambda r: (r.topic, r.partition, r.offset))


def test_batch_read_matches_what_was_produced(spark, broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, 3)
    sent = []
    # Recent timestamps: records from 2023 are past the broker's 7-day retention, which would
    # delete them under the reader whenever its check ran in between (it did, 1 run in ~5).
    base = int(time.time() * 1000) - 3_600_000
    for i in range(600):
        rec = {"value": f"value-{i}".encode() * (1 + i % 7), "timestamp": base + i * 1000}
        if i % 5:
            rec["key"] = f"key-{i}".encode()
        if i % 3 == 0:
            rec["headers"] = [("h", f"{i}".encode()), ("empty", b"")]
        if i % 50 == 7:
            rec["value"] = None
        sent.append(rec)
    produce(broker.bootstrap_servers, topic_name, sent)
    truth = read_topic(broker.bootstrap_servers, topic_name)
    assert len(truth) == 600

    rows = _rows(_load(spark, broker, subscribe=topic_name, includeHeaders="true"))
    assert len(rows) == len(truth)
    for row, rec in zip(rows, truth, strict=True):
        assert (row.partition, row.offset) == (rec.partition, rec.offset)
        assert row.topic == topic_name
        assert row.key == rec.key and row.value == rec.value
        assert row.ms == rec.timestamp and row.timestampType == 0
        assert [(h.key, h.value) for h in row.headers] == list(rec.headers)


def test_offset_and_timestamp_options(spark, broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, 2)
    produce(
        broker.bootstrap_servers,
        topic_name,
        [{"partition": i % 2, "value": str(i).encode(), "timestamp": 1_000_000 + i} for i in range(100)],
    )
    # partition 0 holds even i at offsets i/2, partition 1 odd i
    df = _load(
        spark,
        broker,
        subscribe=topic_name,
        startingOffsets=f'{{"{topic_name}": {{"0": 10, "1": -2}}}}',
        endingOffsets=f'{{"{topic_name}": {{"0": 20, "1": -1}}}}',
    )
    rows = _rows(df)
    assert [(r.partition, r.offset) for r in rows] == [(0, o) for o in range(10, 20)] + [
        (1, o) for o in range(50)
    ]

    rows = _rows(_load(spark, broker, subscribe=topic_name, startingTimestamp="1000090"))
    assert sorted(int(r.value) for r in rows) == list(range(90, 100))

    rows = _rows(_load(spark, broker, assign=f'{{"{topic_name}": [1]}}', endingTimestamp="1000011"))
    assert [int(r.value) for r in rows] == [1, 3, 5, 7, 9]

    with pytest.raises(Exception, match="no record"):
        _load(spark, broker, subscribe=topic_name, startingTimestamp="9000000").collect()
    late = _load(
        spark,
        broker,
        subscribe=topic_name,
        startingTimestamp="9000000",
        startingOffsetsByTimestampStrategy="latest",
    )
    assert late.count() == 0


def test_subscribe_pattern_and_split_ranges(spark, broker, topic_name):
    a, b = f"{topic_name}-a", f"{topic_name}-b"
    create_topic(broker.bootstrap_servers, a, 1)
    create_topic(broker.bootstrap_servers, b, 1)
    produce(broker.bootstrap_servers, a, [{"value": b"a%d" % i} for i in range(120)])
    produce(broker.bootstrap_servers, b, [{"value": b"b%d" % i} for i in range(30)])
    df = _load(spark, broker, subscribePattern=f"{topic_name}-[ab]", maxRecordsPerPartition="50")
    assert df.rdd.getNumPartitions() == 4  # 120 → 3 ranges, 30 → 1
    rows = _rows(df)
    assert [(r.topic, r.offset) for r in rows] == [(a, i) for i in range(120)] + [(b, i) for i in range(30)]
    assert [r.value for r in rows[:3]] == [b"a0", b"a1", b"a2"]
    # maxPartitions packs the 4 ranges into 2 tasks of about equal records, each read in turn.
    packed = _load(spark, broker, subscribePattern=f"{topic_name}-[ab]", maxRecordsPerPartition="50", maxPartitions="2")
    assert packed.rdd.getNumPartitions() == 2
    assert sorted(len(part) for part in packed.rdd.glom().collect()) == [70, 80]  # 40+30 | 40+40
    assert _rows(packed) == rows


def test_fail_on_data_loss_when_records_were_deleted(spark, broker, topic_name):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    create_topic(broker.bootstrap_servers, topic_name, 1)
    produce(broker.bootstrap_servers, topic_name, [{"value": b"%d" % i} for i in range(50)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    futures = admin.delete_records([TopicPartition(topic_name, 0, 20)])
    for f in futures.values():
        f.result(30)
    start = f'{{"{topic_name}": {{"0": 5}}}}'
    with pytest.raises(Exception, match="failOnDataLoss"):
        _load(spark, broker, subscribe=topic_name, startingOffsets=start).collect()
    rows = _rows(_load(spark, broker, subscribe=topic_name, startingOffsets=start, failOnDataLoss="false"))
    assert [r.offset for r in rows] == list(range(20, 50))


def test_batch_write_routes_like_kafka(spark, broker, topic_name):
    from pyspark.sql import functions as F

    create_topic(broker.bootstrap_servers, topic_name, 4)
    other = f"{topic_name}-other"
    create_topic(broker.bootstrap_servers, other, 1)
    rows = [
        (
            f"k{i}" if i % 4 else None,
            f"v{i}",
            other if i % 10 == 0 else None,
            3 if i % 7 == 0 and i % 10 else None,
        )
        for i in range(200)
    ]
    df = spark.createDataFrame(rows, "key string, value string, topic string, partition int").withColumn(
        "headers", F.array(F.struct(F.lit("n").alias("key"), F.col("value").cast("binary").alias("value")))
    )
    df = df.withColumn("topic", F.coalesce("topic", F.lit(topic_name)))
    # one task, so that the order within each partition is the DataFrame's
    df.coalesce(1).write.format("odradek").mode("append").option(
        "kafka.bootstrap.servers", broker.bootstrap_servers
    ).save()

    main = read_topic(broker.bootstrap_servers, topic_name)
    side = read_topic(broker.bootstrap_servers, other)
    assert sorted(r.value for r in side) == sorted(f"v{i}".encode() for i in range(0, 200, 10))
    assert len(main) == 180
    for rec in main:
        i = int(rec.value[1:])
        assert rec.headers == (("n", rec.value),)  # batch writes carry no sink tag
        if i % 7 == 0:
            assert rec.partition == 3
        elif rec.key is not None:
            assert rec.key == f"k{i}".encode()
            assert rec.partition == (murmur2(rec.key) & 0x7FFFFFFF) % 4
        else:
            assert i % 4 == 0
    # order within a partition follows the DataFrame's order
    for p in range(4):
        values = [int(r.value[1:]) for r in main if r.partition == p]
        assert values == sorted(values)


def test_write_rejects_bad_columns(spark, broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, 1)

    def write(df, **options):
        w = (
            df.write.format("odradek")
            .mode("append")
            .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        )
        for k, v in options.items():
            w = w.option(k, v)
        w.save()

    with pytest.raises(Exception, match="value"):
        write(spark.createDataFrame([("a",)], "key string"), topic=topic_name)
    with pytest.raises(Exception, match="string or binary"):
        write(spark.createDataFrame([(1,)], "value int"), topic=topic_name)
    with pytest.raises(Exception, match="no topic"):
        write(spark.createDataFrame([("a",)], "value string"))
    with pytest.raises(Exception, match="cannot be written"):
        write(spark.createDataFrame([("a", 1)], "value string, extra int"), topic=topic_name)
    with pytest.raises(Exception, match="overwrite"):
        spark.createDataFrame([("a",)], "value string").write.format("odradek").mode("overwrite").option(
            "kafka.bootstrap.servers", broker.bootstrap_servers
        ).option("topic", topic_name).save()


def test_a_user_schema_reads_a_subset_of_columns(spark, broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, 1)
    produce(
        broker.bootstrap_servers,
        topic_name,
        [{"value": b"v%d" % i, "headers": [("h", b"%d" % i)]} for i in range(20)],
    )
    reader = spark.read.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    df = (
        reader.schema("offset long, headers array<struct<key: string, value: binary>>, value binary")
        .option("subscribe", topic_name)
        .load()
    )
    assert df.columns == ["offset", "headers", "value"]
    rows = sorted(df.collect())
    assert [(r.offset, r.value, [(h.key, h.value) for h in r.headers]) for r in rows] == [
        (i, b"v%d" % i, [("h", b"%d" % i)]) for i in range(20)
    ]
    with pytest.raises(Exception, match="not in the odradek schema"):
        reader.schema("nope long").option("subscribe", topic_name).load().collect()
    with pytest.raises(Exception, match="offset is bigint"):
        reader.schema("offset int").option("subscribe", topic_name).load().collect()


@pytest.mark.parametrize(("acks", "codec"), [("0", "zstd"), ("1", "gzip"), ("all", "lz4")])
def test_batch_write_acks_and_compression(spark, broker, topic_name, acks, codec):
    create_topic(broker.bootstrap_servers, topic_name, 2)
    df = spark.createDataFrame(
        [(f"k{i}", f"value {i} " * 20) for i in range(300)], "key string, value string"
    )
    (
        df.write.format("odradek")
        .mode("append")
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("topic", topic_name)
        .option("kafka.acks", acks)
        .option("kafka.compression.type", codec)
        .save()
    )
    got = read_topic(broker.bootstrap_servers, topic_name)
    assert sorted((r.key, r.value) for r in got) == sorted(
        (f"k{i}".encode(), f"value {i} ".encode() * 20) for i in range(300)
    )


def test_read_committed_skips_aborted_transactions(spark, broker, topic_name):
    from confluent_kafka import Producer

    create_topic(broker.bootstrap_servers, topic_name, 1)
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"tx-{topic_name}"}
    )
    producer.init_transactions(30)
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic_name, value=f"{outcome}-{i}".encode())
        producer.flush(30)
        (producer.commit_transaction if outcome == "commit" else producer.abort_transaction)(30)
    producer.begin_transaction()
    producer.produce(topic_name, value=b"open")
    producer.flush(30)  # left open: past the last stable offset

    committed = _load(spark, broker, subscribe=topic_name, **{"kafka.isolation.level": "read_committed"})
    assert [r.value for r in _rows(committed)] == [b"commit-%d" % i for i in range(5)] * 2
    uncommitted = _rows(_load(spark, broker, subscribe=topic_name))
    values = [r.value for r in uncommitted]
    assert values.count(b"abort-0") == 1 and b"open" in values
    producer.abort_transaction(30)
