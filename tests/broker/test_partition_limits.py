"""Partition counts have limits, and many partitions neither freeze the broker nor exhaust it.

Guards issue 12's item 3 (and 15's loop stall): CreateTopics with 10^9 partitions froze the
event loop and grew to 8 GB; CreatePartitions to 65,540 exhausted file descriptors and left a
data dir that failed to start with EMFILE; creating thousands of partitions blocked every
other client for seconds.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka.admin import KafkaAdminClient

from odradek.testing.process import BrokerProcess


class LowFdBroker(BrokerProcess):
    """A broker whose RLIMIT_NOFILE (soft and hard) is ``nofile``, set before it starts."""

    def __init__(self, *args, nofile: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.nofile = nofile

    def command(self) -> list[str]:
        cmd = super().command()
        assert cmd[1:3] == ["-m", "odradek"]
        boot = (
            "import resource, runpy, sys; "
            f"resource.setrlimit(resource.RLIMIT_NOFILE, ({self.nofile}, {self.nofile})); "
            "sys.argv = ['odradek'] + sys.argv[1:]; "
            "runpy.run_module('odradek', run_name='__main__')"
        )
        return [sys.executable, "-c", boot, *cmd[3:]]


def admin(proc) -> AdminClient:
    return AdminClient({"bootstrap.servers": proc.bootstrap_servers})


def create_error(client: AdminClient, topic: NewTopic | list[NewTopic], timeout: float = 60) -> dict:
    topics = topic if isinstance(topic, list) else [topic]
    out = {}
    for name, future in client.create_topics(topics, request_timeout=timeout).items():
        try:
            future.result(timeout)
            out[name] = None
        except Exception as exc:  # KafkaException carrying the KafkaError
            out[name] = exc.args[0]
    return out


class BackgroundProducer(threading.Thread):
    """Produces one record at a time and records when each acknowledgement arrived."""

    def __init__(self, bootstrap: str, topic: str):
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
        self.topic = topic
        self.acked: list[float] = []
        self.failed: list = []
        self.done = threading.Event()

    def _on_delivery(self, err, msg):
        if err is not None:
            self.failed.append(err)
        else:
            self.acked.append(time.monotonic())

    def run(self) -> None:
        while not self.done.is_set():
            self.producer.produce(self.topic, b"tick", on_delivery=self._on_delivery)
            self.producer.flush(30)

    def start_and_wait(self) -> None:
        """Start, and return once the first record is acknowledged."""
        self.start()
        deadline = time.monotonic() + 30
        while not self.acked and time.monotonic() < deadline:
            time.sleep(0.01)
        assert self.acked, self.failed

    def stop(self) -> None:
        self.done.set()
        self.join(60)


@pytest.fixture
def ticking(own_broker):
    """A broker, an admin client, and a producer acknowledging one record after another."""
    broker = own_broker()
    client = admin(broker)
    assert create_error(client, NewTopic("ticks", 1, 1))["ticks"] is None
    ticker = BackgroundProducer(broker.bootstrap_servers, "ticks")
    ticker.start_and_wait()
    yield broker, client, ticker
    ticker.stop()


def test_a_billion_partitions_is_invalid_partitions_and_other_clients_keep_producing(ticking):
    broker, client, ticker = ticking
    before = len(ticker.acked)
    # confluent-kafka refuses more than 100000 before sending; kafka-python sends anything.
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=30000)
    try:
        response = kp.create_topics(
            {"huge": {"num_partitions": 1_000_000_000, "replication_factor": 1}}, raise_errors=False
        )
    finally:
        kp.close()
    (topic,) = response["topics"]
    assert (topic["name"], topic["error_code"]) == ("huge", KafkaError.INVALID_PARTITIONS), topic
    assert "max.partitions.per.request=10000" in topic["error_message"]
    deadline = time.monotonic() + 30
    while len(ticker.acked) < before + 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(ticker.acked) >= before + 5 and not ticker.failed
    assert "huge" not in client.list_topics(timeout=10).topics
    assert not os.path.exists(broker.data_dir / "huge-0")


def test_create_partitions_past_the_request_limit_is_refused_and_the_dir_restarts(own_broker):
    broker = own_broker()
    client = admin(broker)
    assert create_error(client, NewTopic("grow", 2, 1))["grow"] is None
    (future,) = client.create_partitions([NewPartitions("grow", 65_540)]).values()
    with pytest.raises(Exception) as info:
        future.result(30)
    assert info.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    assert len(client.list_topics("grow", timeout=10).topics["grow"].partitions) == 2
    broker.restart()
    assert len(admin(broker).list_topics("grow", timeout=10).topics["grow"].partitions) == 2


def test_topics_that_fit_alone_but_not_together_are_all_policy_violation(own_broker):
    broker = own_broker(**{"max.partitions.per.request": 100})
    errors = create_error(admin(broker), [NewTopic(f"part{i}", 40, 1) for i in range(3)])
    assert {e.code() for e in errors.values()} == {KafkaError.POLICY_VIOLATION}, errors
    assert not {"part0", "part1", "part2"} & set(admin(broker).list_topics(timeout=10).topics)


def test_max_broker_partitions_refuses_what_would_pass_it(own_broker):
    broker = own_broker(**{"max.broker.partitions": 10})
    client = admin(broker)
    assert create_error(client, NewTopic("eight", 8, 1))["eight"] is None
    err = create_error(client, NewTopic("five", 5, 1))["five"]
    assert err.code() == KafkaError.POLICY_VIOLATION and "max.broker.partitions" in err.str(), err
    (future,) = client.create_partitions([NewPartitions("eight", 12)]).values()
    with pytest.raises(Exception) as info:
        future.result(30)
    assert info.value.args[0].code() == KafkaError.POLICY_VIOLATION


def broker_fds(proc) -> int:
    return len(os.listdir(f"/proc/{proc.proc.pid}/fd"))


def test_a_data_dir_with_many_partitions_loads_under_a_low_descriptor_limit(tmp_path):
    data = tmp_path / "data"
    with BrokerProcess(data) as big:
        assert create_error(admin(big), NewTopic("wide", 400, 1), timeout=120)["wide"] is None
        p = Producer({"bootstrap.servers": big.bootstrap_servers, "linger.ms": 20})
        for partition in range(400):
            p.produce("wide", f"p{partition}".encode(), partition=partition)
        assert p.flush(60) == 0
    # 400 partitions in use took 5 descriptors each before: 2000 > 256. Loading needs none.
    small = LowFdBroker(data, nofile=256)
    small.start()
    try:
        assert "too many open files" not in small.log_text().lower()
        assert broker_fds(small) < 64
        # A few partitions are served (their files open on first use) ...
        c = Consumer({"bootstrap.servers": small.bootstrap_servers, "group.id": "low-fd", "enable.auto.commit": False})
        c.assign([TopicPartition("wide", p, 0) for p in (0, 199, 399)])
        got = set()
        for _ in range(60):
            for m in c.consume(10, 0.5):
                assert m.error() is None, m.error()
                got.add(m.value())
            if len(got) == 3:
                break
        c.close()
        assert got == {b"p0", b"p199", b"p399"}
        # ... and the descriptor budget refuses more partitions, saying why.
        err = create_error(admin(small), NewTopic("more", 10, 1))["more"]
        assert err.code() == KafkaError.POLICY_VIOLATION and "RLIMIT_NOFILE=256" in err.str(), err
        assert "more than its limit" in small.log_text()  # the start warned about it
    finally:
        small.stop()


def test_creating_thousands_of_partitions_keeps_answering_other_clients(ticking):
    broker, client, ticker = ticking
    started = time.monotonic()
    assert create_error(client, NewTopic("many", 2000, 1), timeout=120)["many"] is None
    finished = time.monotonic()
    assert not ticker.failed
    # The logs are created in slices that yield to the event loop: the other client's
    # records were acknowledged all along, not only once the creation was over.
    during = [t for t in ticker.acked if started < t < finished]
    late = [t for t in during if t > finished - (finished - started) / 3]
    assert len(during) >= 10 and late, (len(during), len(late), finished - started)
    assert len(admin(broker).list_topics("many", timeout=10).topics["many"].partitions) == 2000
    assert all((broker.data_dir / f"many-{p}").is_dir() for p in range(2000))
