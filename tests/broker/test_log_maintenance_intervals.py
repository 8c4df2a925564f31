"""When a broker runs its log maintenance (Kafka's LogManager and ReplicaManager tasks), each
on its own key: ``log.initial.task.delay.ms`` holds back retention (and flushes and the
recovery-point and log-start checkpoints) after start; the log-start-offset and
high-watermark checkpoint files are written every ``log.flush.start.offset.checkpoint.interval.ms``
and ``replica.high.watermark.checkpoint.interval.ms``. Real broker processes, librdkafka."""

from __future__ import annotations

import time

from broker_e2e import admin, create_topic, produce_and_flush, producer
from confluent_kafka import TopicPartition
from support import wait_until
from test_retention_e2e import earliest, segment_bases

from odradek.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_offset_checkpoint,
)

HOUR_MS = 3_600_000


def checkpointed(broker, name: str, topic: str) -> int | None:
    """The offset the checkpoint file ``name`` holds for partition 0 of ``topic``."""
    path = broker.data_dir / name
    return read_offset_checkpoint(str(path)).get((topic, 0)) if path.exists() else None


def started_checkpoints(broker) -> None:
    """Wait for the checkpoints every broker writes at start (its maintenance task may run
    after the listener answers on a busy machine), so a later write is the interval's."""
    wait_until(
        lambda: all(
            (broker.data_dir / n).exists()
            for n in (LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT)
        ),
        30,
        message="the checkpoints written at start",
    )


def test_the_high_watermark_checkpoint_has_its_own_interval(own_broker, topic_name):
    broker = own_broker(
        **{
            "replica.high.watermark.checkpoint.interval.ms": 100,
            "log.flush.start.offset.checkpoint.interval.ms": HOUR_MS,
            "log.initial.task.delay.ms": 0,
        }
    )
    started_checkpoints(broker)
    create_topic(broker, topic_name, 1)
    produce_and_flush(producer(broker), topic_name, [{"value": b"v%d" % i} for i in range(30)])
    wait_until(
        lambda: checkpointed(broker, REPLICATION_OFFSET_CHECKPOINT, topic_name) == 30,
        30,
        message="the high watermark checkpointed",
    )
    # The log-start checkpoint was written once at start, before the topic existed.
    assert checkpointed(broker, LOG_START_OFFSET_CHECKPOINT, topic_name) is None


def test_the_log_start_offset_checkpoint_has_its_own_interval(own_broker, topic_name):
    broker = own_broker(
        **{
            "replica.high.watermark.checkpoint.interval.ms": HOUR_MS,
            "log.flush.start.offset.checkpoint.interval.ms": 100,
            "log.initial.task.delay.ms": 0,
        }
    )
    started_checkpoints(broker)
    create_topic(broker, topic_name, 1)
    produce_and_flush(producer(broker), topic_name, [{"value": b"v%d" % i} for i in range(30)])
    tp = TopicPartition(topic_name, 0, 12)
    admin(broker).delete_records([tp])[tp].result(timeout=15)
    wait_until(
        lambda: checkpointed(broker, LOG_START_OFFSET_CHECKPOINT, topic_name) == 12,
        30,
        message="the log start offset checkpointed",
    )
    # The high-watermark checkpoint was written once at start, before the topic existed.
    assert checkpointed(broker, REPLICATION_OFFSET_CHECKPOINT, topic_name) is None


def test_retention_waits_for_the_initial_task_delay(own_broker, topic_name):
    broker = own_broker(
        **{
            "log.retention.check.interval.ms": 100,
            "log.segment.delete.delay.ms": 0,
            "log.initial.task.delay.ms": HOUR_MS,
            "replica.high.watermark.checkpoint.interval.ms": 100,
        }
    )
    create_topic(broker, topic_name, 1, {"segment.bytes": "1200", "retention.ms": "1"})
    old = int(time.time() * 1000) - HOUR_MS
    prod = producer(broker, batch_size=300, linger_ms=0)
    produce_and_flush(prod, topic_name, [{"value": b"x" * 60, "timestamp": old} for _ in range(60)])
    segments = segment_bases(broker, topic_name)
    assert len(segments) > 2
    # The high-watermark checkpoint is not held back: once it shows the records twice over,
    # the maintenance loop has run many times since they were written; retention has not.
    wait_until(
        lambda: checkpointed(broker, REPLICATION_OFFSET_CHECKPOINT, topic_name) == 60,
        30,
        message="the high watermark checkpointed",
    )
    path = broker.data_dir / REPLICATION_OFFSET_CHECKPOINT
    written = path.stat().st_mtime_ns
    wait_until(lambda: path.stat().st_mtime_ns != written, 30, message="another high-watermark checkpoint")
    assert earliest(broker, topic_name) == 0
    assert segment_bases(broker, topic_name) == segments

    # Restarted with a short delay, retention runs once it has passed.
    broker.overrides["log.initial.task.delay.ms"] = "1000"
    broker.restart()
    wait_until(lambda: segment_bases(broker, topic_name)[0] > 0, 30, message="expired segments deleted")
    assert earliest(broker, topic_name) == segment_bases(broker, topic_name)[0]


def test_idle_producer_ids_expire_every_check_interval(own_broker, topic_name):
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTopicPartition

    broker = own_broker(
        **{"producer.id.expiration.ms": 1000, "producer.id.expiration.check.interval.ms": 200}
    )
    create_topic(broker, topic_name, 1)
    produce_and_flush(producer(broker, enable_idempotence=True, linger_ms=0), topic_name, [{"value": b"v"}])
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    tp = KTopicPartition(topic_name, 0)
    try:
        assert len(kp.describe_producers([tp])[tp].active_producers) == 1
        # Retention (which used to expire them too) is 30 s away (log.initial.task.delay.ms).
        wait_until(
            lambda: not kp.describe_producers([tp])[tp].active_producers,
            30,
            message="the producer id expired",
        )
    finally:
        kp.close()
