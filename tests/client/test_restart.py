"""A broker restart in the middle of producing and consuming."""

from __future__ import annotations

import threading
import time

from odradek import Admin, Consumer, Producer, TopicPartition


def test_broker_restart_mid_stream(own_kafka):
    """Clients reconnect by themselves; with a persistent broker nothing acknowledged is lost.

    tansu keeps its data in memory, so there the restart empties the broker: the test then
    checks that the same producer and consumer carry on (tansu also fails a few produce
    requests while it re-creates the topic, with UNKNOWN_SERVER_ERROR and "AlreadyExists"
    in its log, so only the records sent once it has settled must all succeed).
    """
    broker = own_kafka()
    topic = "restart-topic"
    with Admin(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_topics([(topic, 2, 1)])
    futures = []
    stop = threading.Event()
    errors = []
    consumed = []
    producer = Producer(
        bootstrap_servers=broker.bootstrap_servers,
        linger_ms=5,
        delivery_timeout_ms=60_000,
        retry_backoff_ms=50,
    )
    consumer = Consumer(
        bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest", request_timeout_ms=5000
    )
    consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])

    def produce():
        i = 0
        try:
            while not stop.is_set():
                futures.append((i, producer.send(topic, b"%d" % i)))
                i += 1
                time.sleep(0.002)
        except Exception as exc:
            errors.append(exc)

    def consume():
        try:
            while not stop.is_set():
                consumed.extend(consumer.poll(0.2))
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for t in threads:
        t.start()
    try:
        time.sleep(1.0)
        assert any(f.done() and f.succeeded() for _, f in futures)
        broker.restart()
        restarted_at = len(futures)
        time.sleep(3.0)
        producer.flush(60)
        if not broker.persistent:
            # A second wave, once tansu has settled: every record must make it. (tansu
            # re-creates the topic with its default partition count: aim at 0 and 1.)
            wave = [
                (i, producer.send(topic, b"%d" % i, partition=i % 2)) for i in range(1_000_000, 1_000_200)
            ]
            producer.flush(60)
            assert all(f.succeeded() for _, f in wave), [
                f.exception(0) for _, f in wave if not f.succeeded()
            ][:3]
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not {i for i, _ in wave} <= {
                int(r.value) for r in consumed
            }:
                time.sleep(0.2)
            assert {i for i, _ in wave} <= {int(r.value) for r in consumed}, "the consumer did not resume"
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    producer.close()
    consumer.close()
    assert not errors, errors
    if broker.persistent:
        after = futures[restarted_at:]
        assert after and all(f.succeeded() for _, f in after), [
            f.exception(0) for _, f in after if not f.succeeded()
        ][:3]
        acked = {i for i, f in futures if f.succeeded()}
        with Consumer(bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
            stored = []
            deadline = time.monotonic() + 20
            while len(stored) < len(acked) and time.monotonic() < deadline:
                stored.extend(c.poll(0.5))
        values = [int(r.value) for r in stored]
        assert len(values) == len(set(values)), "duplicates after the restart"
        assert acked <= set(values), f"lost {len(acked - set(values))} acknowledged records"
        assert any(int(r.value) >= restarted_at for r in consumed), (
            "the consumer did not resume after the restart"
        )
