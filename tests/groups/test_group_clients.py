"""Consumer groups with real clients: confluent-kafka (librdkafka), kafka-python and aiokafka."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
import uuid

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from support import wait_until

FAST = {
    "session.timeout.ms": 1500,
    "heartbeat.interval.ms": 100,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 100,
    "topic.metadata.refresh.interval.ms": 1000,
}



def new_topic(broker, partitions: int) -> str:
    name = f"grp-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    return name


def produce(broker, topic: str, values: list[str], partitions: int) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), partition=i % partitions)
    assert p.flush(15) == 0


class Tracked:
    """A confluent consumer that remembers its assignment (eager or incremental) and what it read."""

    def __init__(self, broker, group: str, topic: str, **conf):
        self.assigned: set[int] = set()
        self.values: list[str] = []
        self.assigns = 0
        self.revokes = 0
        self.errors: list = []
        self.consumer = Consumer(
            {"bootstrap.servers": broker.bootstrap_servers, "group.id": group, **FAST, **conf}
        )
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, consumer, partitions):
        self.assigns += 1
        self.assigned |= {p.partition for p in partitions}

    def _on_revoke(self, consumer, partitions):
        self.revokes += 1
        self.assigned -= {p.partition for p in partitions}

    def poll(self, timeout: float = 0.02) -> None:
        msg = self.consumer.poll(timeout)
        if msg is None:
            return
        if msg.error():
            self.errors.append(msg.error())
            return
        self.values.append(msg.value().decode())

    def close(self) -> None:
        self.consumer.close()


CHILD = r"""
import json, sys
from confluent_kafka import Consumer
conf, topic = json.loads(sys.argv[1]), sys.argv[2]
c = Consumer(conf)
def show(kind):
    return lambda consumer, parts: print(json.dumps({kind: [p.partition for p in parts]}), flush=True)
c.subscribe([topic], on_assign=show("assign"), on_revoke=show("revoke"))
while True:
    m = c.poll(0.05)
    if m is not None and not m.error():
        print(json.dumps({"value": m.value().decode()}), flush=True)
"""


class ChildConsumer:
    """A confluent consumer in a subprocess (so it can be SIGKILLed), reporting on stdout."""

    def __init__(self, broker, group: str, topic: str, **conf):
        full = {"bootstrap.servers": broker.bootstrap_servers, "group.id": group, **FAST, **conf}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, json.dumps(full), topic], stdout=subprocess.PIPE, text=True
        )
        self.assigned: set[int] = set()
        self.values: list[str] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            event = json.loads(line)
            with self.lock:
                if "assign" in event:
                    self.assigned |= set(event["assign"])
                elif "revoke" in event:
                    self.assigned -= set(event["revoke"])
                else:
                    self.values.append(event["value"])

    def kill(self) -> None:
        self.proc.kill()  # SIGKILL: no LeaveGroup, no commit; the broker must notice by itself
        self.proc.wait()


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky"])
def test_three_consumers_split_then_survive_leave_and_kill(group_broker, strategy):
    partitions = 6
    topic = new_topic(group_broker, partitions)
    group = f"split-{strategy}-{uuid.uuid4().hex[:6]}"
    values = [f"v{i}" for i in range(600)]
    produce(group_broker, topic, values[:300], partitions)
    conf = {"partition.assignment.strategy": strategy}
    child = ChildConsumer(group_broker, group, topic, **conf)
    a = Tracked(group_broker, group, topic, **conf)
    b = Tracked(group_broker, group, topic, **conf)
    try:

        def split():
            with child.lock:
                sets = [a.assigned, b.assigned, set(child.assigned)]
            return all(len(s) == 2 for s in sets) and set().union(*sets) == set(range(partitions))

        def poll_both():
            a.poll()
            b.poll()

        wait_until(split, 30, f"three-way split ({strategy})", step=poll_both)
        produce(group_broker, topic, values[300:], partitions)
        wait_until(
            lambda: len(a.values) + len(b.values) + len(child.values) >= 200, 15, "some records", step=poll_both
        )
        b.close()  # leaves the group
        child.kill()  # dies
        wait_until(lambda: a.assigned == set(range(partitions)), 30, "the survivor takes over", step=a.poll)
        seen = lambda: set(a.values) | set(b.values) | set(child.values)  # noqa: E731
        wait_until(lambda: seen() >= set(values), 30, "every record consumed", step=a.poll)
        assert not [e for e in a.errors if e.code() != KafkaError._PARTITION_EOF]
    finally:
        a.close()
        child.kill()


def test_committed_offsets_equal_end_offsets_and_survive_restarts(own_broker):
    broker = own_broker(**{"group.initial.rebalance.delay.ms": 100, "group.min.session.timeout.ms": 500})
    partitions = 3
    topic = new_topic(broker, partitions)
    group = "durable"
    produce(broker, topic, [f"r{i}" for i in range(90)], partitions)
    c = Tracked(broker, group, topic, **{"enable.auto.commit": False})
    wait_until(lambda: len(c.values) == 90, 20, "all records", step=c.poll)
    c.consumer.commit(asynchronous=False)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    ends = [c.consumer.get_watermark_offsets(tp, timeout=5)[1] for tp in tps]
    assert ends == [30, 30, 30]
    assert [tp.offset for tp in c.consumer.committed(tps, timeout=10)] == ends
    c.close()

    def committed_after_restart():
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        request = [ConsumerGroupTopicPartitions(group, tps)]
        result = admin.list_consumer_group_offsets(request)[group].result(20)
        return [tp.offset for tp in result.topic_partitions]

    broker.stop()  # clean shutdown
    broker.start()
    assert committed_after_restart() == ends
    broker.kill()  # crash
    broker.start()
    assert committed_after_restart() == ends
    # the group resumes where it left off: nothing is read twice
    again = Tracked(broker, group, topic)
    wait_until(lambda: again.assigned == set(range(partitions)), 20, "assignment", step=again.poll)
    produce(broker, topic, ["after"], partitions)
    wait_until(lambda: again.values, 20, "the new record", step=again.poll)
    assert again.values == ["after"]
    again.close()


def test_admin_client_lists_describes_alters_and_deletes(group_broker):
    from kafka.admin import KafkaAdminClient

    topic = new_topic(group_broker, 4)
    group = f"admin-{uuid.uuid4().hex[:6]}"
    produce(group_broker, topic, [f"x{i}" for i in range(40)], 4)
    members = [Tracked(group_broker, group, topic, **{"client.id": f"member-{i}"}) for i in range(2)]
    admin = AdminClient({"bootstrap.servers": group_broker.bootstrap_servers})
    try:

        def poll_all():
            for m in members:
                m.poll()

        wait_until(lambda: sum(len(m.values) for m in members) == 40, 20, "all records", step=poll_all)
        wait_until(lambda: all(len(m.assigned) == 2 for m in members), 20, "2+2 split", step=poll_all)
        listed = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(10)
        assert group in {g.group_id for g in listed.valid}
        desc = admin.describe_consumer_groups([group])[group].result(10)
        assert desc.state == ConsumerGroupState.STABLE and desc.partition_assignor == "range"
        assert not desc.is_simple_consumer_group
        assert sorted(m.client_id for m in desc.members) == ["member-0", "member-1"]
        owned = [tp.partition for m in desc.members for tp in m.assignment.topic_partitions]
        assert sorted(owned) == [0, 1, 2, 3]

        def committed():
            listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(
                10
            )
            return sorted((tp.partition, tp.offset) for tp in listed.topic_partitions)

        wait_until(
            lambda: committed() == [(p, 10) for p in range(4)], 10, "auto-committed offsets", step=poll_all
        )
        # alters and deletes need a group without members
        for m in members:
            m.close()
        members = []
        wait_until(
            lambda: (
                admin.describe_consumer_groups([group])[group].result(10).state == ConsumerGroupState.EMPTY
            ),
            10,
            "empty group",
        )
        altered = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 4)])]
        )[group].result(10)
        assert [tp.error for tp in altered.topic_partitions] == [None, None]
        kadmin = KafkaAdminClient(bootstrap_servers=group_broker.bootstrap_servers)
        try:
            from kafka.structs import TopicPartition as KTP

            deleted = kadmin.delete_group_offsets(group, [KTP(topic, 3)])
            assert all(err is None or getattr(err, "errno", 0) == 0 for err in deleted.values()), deleted
        finally:
            kadmin.close()
        assert committed() == [(0, 3), (1, 4), (2, 10)]
        admin.delete_consumer_groups([group])[group].result(10)
        listed = admin.list_consumer_groups().result(10)
        assert group not in {g.group_id for g in listed.valid}
        empty = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
        assert [tp.offset for tp in empty.topic_partitions if tp.offset >= 0] == []
    finally:
        for m in members:
            m.close()


def test_kafka_python_group_consumers(group_broker):
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition as KTP

    topic = new_topic(group_broker, 4)
    group = f"kp-{uuid.uuid4().hex[:6]}"
    values = [f"k{i}" for i in range(200)]
    produce(group_broker, topic, values, 4)
    seen: list[list[str]] = [[], []]
    assignments: list[set] = [set(), set()]
    stop = threading.Event()
    consumers = []

    def run(i: int) -> None:
        c = KafkaConsumer(
            topic,
            group_id=group,
            bootstrap_servers=group_broker.bootstrap_servers,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=2000,
            heartbeat_interval_ms=200,
        )
        consumers.append(c)
        while not stop.is_set():
            for records in c.poll(timeout_ms=100).values():
                seen[i].extend(r.value.decode() for r in records)
            assignments[i] = {tp.partition for tp in c.assignment()}
            c.commit()
        c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: len(seen[0]) + len(seen[1]) >= 200, 30, "all records")
        wait_until(
            lambda: (
                len(assignments[0]) == 2 and len(assignments[1]) == 2 and not assignments[0] & assignments[1]
            ),
            30,
            "a 2+2 split",
        )
        assert set(seen[0]) | set(seen[1]) == set(values)
    finally:
        stop.set()
        for t in threads:
            t.join(20)
    check = KafkaConsumer(
        bootstrap_servers=group_broker.bootstrap_servers, group_id=group, enable_auto_commit=False
    )
    try:
        assert [check.committed(KTP(topic, p)) for p in range(4)] == [50, 50, 50, 50]
    finally:
        check.close()


def test_aiokafka_group_consumers(group_broker):
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATP

    topic = new_topic(group_broker, 4)
    group = f"aio-{uuid.uuid4().hex[:6]}"
    values = [f"a{i}" for i in range(100)]
    produce(group_broker, topic, values, 4)

    async def main():
        consumers = [
            AIOKafkaConsumer(
                topic,
                group_id=group,
                bootstrap_servers=group_broker.bootstrap_servers,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=2000,
                heartbeat_interval_ms=200,
            )
            for _ in range(2)
        ]
        for c in consumers:
            await c.start()
        got: set[str] = set()
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                for c in consumers:
                    batch = await c.getmany(timeout_ms=100)
                    for records in batch.values():
                        got.update(r.value.decode() for r in records)
                split = [{tp.partition for tp in c.assignment()} for c in consumers]
                if got == set(values) and all(len(s) == 2 for s in split) and not split[0] & split[1]:
                    break
            assert got == set(values)
            assert all(len(s) == 2 for s in split) and not split[0] & split[1], split
            for c in consumers:
                await c.commit()
            committed = [await consumers[0].committed(ATP(topic, p)) for p in range(4)]
            assert committed == [25, 25, 25, 25]
        finally:
            for c in consumers:
                await c.stop()

    asyncio.run(main())


def test_static_member_rejoins_without_rebalance(group_broker):
    topic = new_topic(group_broker, 4)
    group = f"static-{uuid.uuid4().hex[:6]}"
    static = {"session.timeout.ms": 4000}
    a = Tracked(group_broker, group, topic, **{"group.instance.id": "inst-a", **static})
    b = Tracked(group_broker, group, topic, **{"group.instance.id": "inst-b", **static})

    def poll_both():
        a.poll()
        b.poll()

    wait_until(lambda: len(a.assigned) == 2 and len(b.assigned) == 2, 20, "2+2 split", step=poll_both)
    for _ in range(20):  # let it settle
        poll_both()
    a_parts, b_assigns, b_revokes = set(a.assigned), b.assigns, b.revokes
    a.close()  # a static member does not leave the group when it closes
    a2 = Tracked(group_broker, group, topic, **{"group.instance.id": "inst-a", **static})
    try:
        wait_until(
            lambda: a2.assigned, 20, "the restarted member's assignment", step=lambda: (a2.poll(), b.poll())
        )
        assert a2.assigned == a_parts
        for _ in range(50):  # 1 s: long enough for a rebalance to reach b
            a2.poll()
            b.poll()
        assert (b.assigns, b.revokes) == (b_assigns, b_revokes), "b saw a rebalance"
        desc = AdminClient({"bootstrap.servers": group_broker.bootstrap_servers})
        state = desc.describe_consumer_groups([group])[group].result(10)
        assert state.state == ConsumerGroupState.STABLE
        assert sorted(m.group_instance_id for m in state.members) == ["inst-a", "inst-b"]
    finally:
        a2.close()
        b.close()


def test_consumer_past_max_poll_interval_is_removed(group_broker):
    topic = new_topic(group_broker, 4)
    group = f"slow-{uuid.uuid4().hex[:6]}"
    slow = Tracked(group_broker, group, topic, **{"session.timeout.ms": 1000, "max.poll.interval.ms": 1500})
    fast = Tracked(group_broker, group, topic)
    try:
        wait_until(
            lambda: len(slow.assigned) == 2 and len(fast.assigned) == 2,
            20,
            "2+2 split",
            step=lambda: (slow.poll(), fast.poll()),
        )
        started = time.monotonic()
        wait_until(
            lambda: fast.assigned == {0, 1, 2, 3}, 15, "the slow member's partitions move", step=fast.poll
        )
        assert time.monotonic() - started >= 1.0
        admin = AdminClient({"bootstrap.servers": group_broker.bootstrap_servers})
        desc = admin.describe_consumer_groups([group])[group].result(10)
        assert len(desc.members) == 1 and desc.state == ConsumerGroupState.STABLE
    finally:
        slow.close()
        fast.close()


def test_kcat_balanced_consumer(group_broker):
    """Debian's kcat (an older librdkafka) consumes as a group member and commits."""
    topic = new_topic(group_broker, 3)
    group = f"kcat-{uuid.uuid4().hex[:6]}"
    produce(group_broker, topic, [f"c{i}" for i in range(30)], 3)
    cmd = ["kcat", "-b", group_broker.bootstrap_servers, "-G", group, "-o", "beginning", "-e", "-q"]
    out = subprocess.run(
        [*cmd, "-X", "session.timeout.ms=6000", topic], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split()) == sorted(f"c{i}" for i in range(30))
    check = Consumer({"bootstrap.servers": group_broker.bootstrap_servers, "group.id": group})
    try:
        committed = check.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
        assert [tp.offset for tp in committed] == [10, 10, 10]
    finally:
        check.close()


def test_partition_count_change_rebalances_the_group(group_broker):
    from confluent_kafka.admin import NewPartitions

    topic = new_topic(group_broker, 2)
    group = f"grow-{uuid.uuid4().hex[:6]}"
    a = Tracked(group_broker, group, topic)
    b = Tracked(group_broker, group, topic)

    def poll_both():
        a.poll()
        b.poll()

    try:
        wait_until(lambda: len(a.assigned) == 1 and len(b.assigned) == 1, 20, "1+1 split", step=poll_both)
        admin = AdminClient({"bootstrap.servers": group_broker.bootstrap_servers})
        admin.create_partitions([NewPartitions(topic, 4)])[topic].result(10)
        wait_until(
            lambda: len(a.assigned) == 2 and len(b.assigned) == 2 and a.assigned | b.assigned == {0, 1, 2, 3},
            20,
            "the new partitions are assigned",
            step=poll_both,
        )
    finally:
        a.close()
        b.close()


def test_stable_group_survives_broker_restart_without_rebalance(own_broker):
    """The group is rebuilt from __consumer_offsets: members keep their ids, generation and partitions."""
    broker = own_broker(**{"group.initial.rebalance.delay.ms": 100, "group.min.session.timeout.ms": 500})
    topic = new_topic(broker, 4)
    conf = {"session.timeout.ms": 6000}
    a, b = Tracked(broker, "restart", topic, **conf), Tracked(broker, "restart", topic, **conf)

    def poll_both():
        a.poll()
        b.poll()

    try:
        wait_until(lambda: len(a.assigned) == 2 and len(b.assigned) == 2, 20, "2+2 split", step=poll_both)

        def members():
            admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
            desc = admin.describe_consumer_groups(["restart"])["restart"].result(10)
            return desc.state, sorted(m.member_id for m in desc.members)

        before = members()
        assigns = (a.assigns, b.assigns)
        broker.stop()
        broker.start()
        produce(broker, topic, [f"n{i}" for i in range(20)], 4)
        wait_until(
            lambda: set(a.values) | set(b.values) >= {f"n{i}" for i in range(20)},
            30,
            "new records",
            step=poll_both,
        )
        assert members() == before and before[0] == ConsumerGroupState.STABLE
        assert (a.assigns, b.assigns) == assigns
    finally:
        a.close()
        b.close()
