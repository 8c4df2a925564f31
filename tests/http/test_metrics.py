"""/metrics asserted by value: records and bytes in and out, request histograms, group lag,
and the single-node values of the cluster gauges."""

from __future__ import annotations

import threading

from confluent_kafka import Consumer, Producer, TopicPartition
from http_helpers import create_topic, scrape, series, value, wait_until

BTM = "kafka_server_brokertopicmetrics_"
PRODUCE_TIME = "kafka_network_requestmetrics_totaltimems"


def log_bytes_on_disk(broker, topic: str) -> int:
    return sum(f.stat().st_size for f in broker.data_dir.glob(f"{topic}-*/*.log"))


def produce(broker, topic: str, values, partition: int | None = None, **conf) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, **conf})
    for i, v in enumerate(values):
        kwargs = {"partition": partition} if partition is not None else {"partition": i % 2}
        p.produce(topic, value=v, key=b"key-%d" % i, **kwargs)
    assert p.flush(15) == 0


def consume(c, n: int) -> None:
    """Exactly ``n`` records from a confluent-kafka consumer."""
    got = []
    wait_until(lambda: got.extend(c.consume(num_messages=n - len(got), timeout=0.5)) or len(got) >= n, 30,
               message=f"{n} records")  # fmt: skip
    assert len(got) == n


def test_messages_in_and_bytes_in_move_by_exactly_what_was_produced(http_broker, topic_name):
    create_topic(http_broker, topic_name, partitions=2)
    before = scrape(http_broker.http_url)
    produce(http_broker, topic_name, [b"v" * 100] * 250)

    after = scrape(http_broker.http_url)
    on_disk = log_bytes_on_disk(http_broker, topic_name)
    assert on_disk > 250 * 100
    assert value(after, BTM + "messagesin_total", topic=topic_name) == 250
    assert value(after, BTM + "bytesin_total", topic=topic_name) == on_disk
    # The all-topics figure (no topic label) moved by the same amounts.
    assert value(after, BTM + "messagesin_total") - value(before, BTM + "messagesin_total") == 250
    assert value(after, BTM + "bytesin_total") - value(before, BTM + "bytesin_total") == on_disk
    sizes = [value(after, "kafka_log_log_size", topic=topic_name, partition=p) for p in (0, 1)]
    assert sum(sizes) == on_disk
    assert [value(after, "kafka_log_log_logendoffset", topic=topic_name, partition=p) for p in (0, 1)] == [125, 125]
    assert value(after, "kafka_log_log_numlogsegments", topic=topic_name, partition=0) == 1


def test_bytes_out_counts_every_record_byte_sent_to_a_consumer(http_broker, topic_name):
    create_topic(http_broker, topic_name, partitions=1)
    produce(http_broker, topic_name, [b"x" * 300] * 120, partition=0)
    on_disk = log_bytes_on_disk(http_broker, topic_name)

    from odradek.client import Consumer as OdradekConsumer

    options = {"enable_auto_commit": False, "auto_offset_reset": "earliest"}
    with OdradekConsumer(bootstrap_servers=http_broker.bootstrap_servers, **options) as c:
        c.assign([(topic_name, 0)])
        got = []
        wait_until(lambda: got.extend(c.poll(timeout=0.5)) or len(got) >= 120, message="120 records")
    samples = scrape(http_broker.http_url)
    # Each batch went out exactly once: the consumer read the partition once, from the start.
    assert value(samples, BTM + "bytesout_total", topic=topic_name) == on_disk
    assert value(samples, BTM + "totalfetchrequests_total", topic=topic_name) >= 1
    assert value(samples, BTM + "failedfetchrequests_total", topic=topic_name) == 0


def test_the_produce_time_histogram_counts_every_produce_request(http_broker, topic_name):
    create_topic(http_broker, topic_name)
    before = scrape(http_broker.http_url)
    count_before = value(before, PRODUCE_TIME + "_count", request="Produce") or 0
    # linger.ms=0 and a flush after each record: one Produce request per record.
    p = Producer({"bootstrap.servers": http_broker.bootstrap_servers, "linger.ms": 0, "acks": 1})
    for i in range(30):
        p.produce(topic_name, value=b"r%d" % i)
        assert p.flush(10) == 0
    # acks=0 requests get no answer but are counted as well.
    p0 = Producer({"bootstrap.servers": http_broker.bootstrap_servers, "linger.ms": 0, "acks": 0})
    for i in range(10):
        p0.produce(topic_name, value=b"z%d" % i)
        assert p0.flush(10) == 0
    wait_until(
        lambda: value(scrape(http_broker.http_url), BTM + "messagesin_total", topic=topic_name) == 40,
        message="the 10 acks=0 records to be appended",
    )

    after = scrape(http_broker.http_url)
    assert value(after, PRODUCE_TIME + "_count", request="Produce") - count_before == 40
    assert value(after, PRODUCE_TIME + "_bucket", request="Produce", le="+Inf") == value(
        after, PRODUCE_TIME + "_count", request="Produce"
    )
    assert value(after, PRODUCE_TIME + "_sum", request="Produce") > (
        value(before, PRODUCE_TIME + "_sum", request="Produce") or 0
    )
    buckets = sorted(
        (float(dict(labels)["le"]), v)
        for labels, v in series(after, PRODUCE_TIME + "_bucket").items()
        if dict(labels)["request"] == "Produce"
    )
    counts = [v for _, v in buckets]
    assert counts == sorted(counts), "buckets are cumulative"
    assert value(after, "kafka_network_requestmetrics_requests_total", request="Produce") - (
        value(before, "kafka_network_requestmetrics_requests_total", request="Produce") or 0
    ) == 40
    assert value(after, PRODUCE_TIME + "_count", request="Metadata") >= 1  # Kafka's request names
    assert value(after, BTM + "totalproducerequests_total", topic=topic_name) == 40


def test_a_group_that_stops_halfway_shows_its_lag_and_none_once_caught_up(http_broker, topic_name):
    group = f"g-{topic_name}"
    create_topic(http_broker, topic_name, partitions=2)
    produce(http_broker, topic_name, [b"m%d" % i for i in range(100)])  # 50 per partition

    def consumer():
        return Consumer(
            {
                "bootstrap.servers": http_broker.bootstrap_servers,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )

    # Read 25 records of each partition, commit there, and stop: halfway.
    c = consumer()
    c.assign([TopicPartition(topic_name, p, 0) for p in (0, 1)])
    seen = {0: -1, 1: -1}

    def read_some():
        for m in c.consume(num_messages=50, timeout=0.5):
            seen[m.partition()] = max(seen[m.partition()], m.offset())
        return min(seen.values()) >= 24

    wait_until(read_some, 30, message="25 records of each partition")
    c.commit(offsets=[TopicPartition(topic_name, p, 25) for p in (0, 1)], asynchronous=False)
    c.close()

    samples = scrape(http_broker.http_url)
    for p in (0, 1):
        labels = {"consumergroup": group, "topic": topic_name, "partition": p}
        assert value(samples, "kafka_consumergroup_current_offset", **labels) == 25
        assert value(samples, "kafka_consumergroup_lag", **labels) == 25
    assert value(samples, "kafka_consumergroup_lag_sum", consumergroup=group, topic=topic_name) == 50
    assert value(samples, "kafka_consumergroup_members", consumergroup=group) == 0
    assert value(samples, "kafka_topic_partition_current_offset", topic=topic_name, partition=0) == 50

    c = consumer()
    c.subscribe([topic_name])
    consume(c, 50)  # the group goes on from its commits
    c.commit(asynchronous=False)
    c.close()
    samples = scrape(http_broker.http_url)
    assert value(samples, "kafka_consumergroup_lag_sum", consumergroup=group, topic=topic_name) == 0
    assert value(samples, "kafka_consumergroup_current_offset_sum", consumergroup=group, topic=topic_name) == 100


def test_single_node_cluster_gauges(http_broker, topic_name):
    create_topic(http_broker, topic_name, partitions=3)
    samples = scrape(http_broker.http_url)
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(samples, "kafka_server_replicamanager_underminisrpartitioncount") == 0
    assert value(samples, "kafka_server_replicamanager_isrshrinks_total") == 0
    assert value(samples, "kafka_server_replicamanager_isrexpands_total") == 0
    partitions = value(samples, "kafka_server_replicamanager_partitioncount")
    assert partitions == value(samples, "kafka_controller_kafkacontroller_globalpartitioncount")
    assert partitions == value(samples, "kafka_server_replicamanager_leadercount")
    assert value(samples, "kafka_brokers") == 1
    assert value(samples, "kafka_topic_partitions", topic=topic_name) == 3
    assert value(samples, "kafka_topic_partition_under_replicated_partition", topic=topic_name, partition=2) == 0
    # the process itself, from prometheus_client's collector
    assert value(samples, "process_resident_memory_bytes") > 10 * 1024 * 1024


def test_connections_and_waiting_fetches_are_gauged(http_broker, topic_name):
    create_topic(http_broker, topic_name)
    c = Consumer(
        {
            "bootstrap.servers": http_broker.bootstrap_servers,
            "group.id": f"g-{topic_name}",
            "fetch.wait.max.ms": 5000,  # long polls on an empty partition park in the purgatory
            "auto.offset.reset": "earliest",
        }
    )
    stop = threading.Event()

    def poll():
        while not stop.is_set():
            c.poll(0.2)

    c.assign([TopicPartition(topic_name, 0, 0)])
    poller = threading.Thread(target=poll)
    poller.start()
    try:
        samples = wait_until(
            lambda: (s := scrape(http_broker.http_url))
            and (value(s, "kafka_server_delayedoperationpurgatory_numdelayedoperations", delayedOperation="Fetch") or 0)
            >= 1
            and s,
            message="a fetch waiting in the purgatory",
        )
        assert value(samples, "kafka_server_delayedoperationpurgatory_purgatorysize", delayedOperation="Fetch") >= 1
        assert value(samples, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT", network_processor=0) >= 1
        assert value(samples, "kafka_server_delayedoperationpurgatory_numdelayedoperations", delayedOperation="Heartbeat") is not None
    finally:
        stop.set()
        poller.join()
        c.close()


def test_log_flushes_are_timed(http_broker, topic_name):
    create_topic(http_broker, topic_name, config={"flush.messages": "1"})
    before = value(scrape(http_broker.http_url), "kafka_log_logflushstats_logflushrateandtimems_count")
    p = Producer({"bootstrap.servers": http_broker.bootstrap_servers, "linger.ms": 0})
    for i in range(5):
        p.produce(topic_name, value=b"f%d" % i)
        assert p.flush(10) == 0
    after = scrape(http_broker.http_url)
    # flush.messages=1: every append is fsynced, and each fsync is timed.
    assert value(after, "kafka_log_logflushstats_logflushrateandtimems_count") - before >= 5
    assert value(after, "kafka_log_logflushstats_logflushrateandtimems_sum") > 0
