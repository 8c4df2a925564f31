"""Consumer groups against a real broker: assignors, leaving, crashing, listeners, static members."""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import threading
import time

import pytest
from client_support import GROUP_OPTIONS

from odradek import Consumer, Producer, TopicPartition
from odradek.client.consumer.subscription import ConsumerRebalanceListener

HERE = os.path.dirname(os.path.abspath(__file__))


class Member:
    """An in-process member polling on its own thread; remembers what it owns and read."""

    def __init__(self, bootstrap, topic, group, strategy, listener=None, **options):
        self.consumer = Consumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            partition_assignment_strategy=[strategy],
            **{**GROUP_OPTIONS, **options},
        )
        self.consumer.subscribe([topic], listener=listener)
        self.assigned: set[TopicPartition] = set()
        self.records = []
        self.error = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        try:
            while not self._stop.is_set():
                self.records.extend(self.consumer.poll(0.2))
                self.assigned = self.consumer.assignment()
        except Exception as exc:  # surfaced by the test
            self.error = exc

    def close(self):
        self._stop.set()
        self.thread.join(10)
        self.consumer.close()


class ProcessMember:
    """A member in a child process, so it can be killed with SIGKILL."""

    def __init__(self, bootstrap, topic, group, strategy):
        self.proc = subprocess.Popen(
            [
                sys.executable,
                os.path.join(HERE, "group_member.py"),
                bootstrap,
                topic,
                group,
                strategy,
                json.dumps(GROUP_OPTIONS),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        self.assigned: set[TopicPartition] = set()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            self.assigned = {TopicPartition(t, p) for t, p in json.loads(line)["assigned"]}

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()  # SIGKILL: no LeaveGroup, no commit
            self.proc.wait()


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def split_evenly(members, partitions, each):
    owned = [m.assigned for m in members]
    union = set().union(*owned)
    return (
        union == partitions
        and sum(len(o) for o in owned) == len(partitions)
        and all(len(o) == each for o in owned)
    )


def scenario(bootstrap, admin, strategy, suffix):
    topic = f"grp-{strategy}-{suffix}"
    group = f"g-{strategy}-{suffix}"
    admin.create_topics([(topic, 6, 1)])
    partitions = {TopicPartition(topic, p) for p in range(6)}
    a = Member(bootstrap, topic, group, strategy)
    b = Member(bootstrap, topic, group, strategy)
    c = ProcessMember(bootstrap, topic, group, strategy)
    try:
        wait_for(
            lambda: split_evenly([a, b, c], partitions, 2),
            45,
            f"{strategy}: three members with 2 partitions each",
        )
        b.close()  # leaves the group cleanly
        wait_for(
            lambda: split_evenly([a, c], partitions, 3),
            45,
            f"{strategy}: two members with 3 each after a leave",
        )
        c.kill()  # dies: the group notices after session_timeout_ms
        wait_for(
            lambda: a.assigned == partitions, 45, f"{strategy}: the survivor owns everything after a crash"
        )
        with Producer(bootstrap_servers=bootstrap) as p:
            for i in range(60):
                p.send(topic, b"after-%d" % i, partition=i % 6)
            p.flush()
        wait_for(
            lambda: sum(1 for r in a.records if r.value.startswith(b"after-")) >= 60,
            30,
            "records after the crash",
        )
        assert a.error is None and b.error is None
    finally:
        c.kill()
        for m in (a, b):
            try:
                m.close()
            except Exception:
                pass
    return strategy


def test_three_members_each_assignor_survive_leave_and_kill(bootstrap, admin):
    suffix = os.urandom(4).hex()
    strategies = ["range", "roundrobin", "sticky", "cooperative-sticky"]
    with concurrent.futures.ThreadPoolExecutor(len(strategies)) as pool:
        results = [pool.submit(scenario, bootstrap, admin, s, suffix) for s in strategies]
        assert sorted(f.result() for f in results) == sorted(strategies)


class Recorder(ConsumerRebalanceListener):
    def __init__(self, consumer_box):
        self.events = []
        self.box = consumer_box

    def on_partitions_revoked(self, revoked):
        self.events.append(("revoked", set(revoked)))
        if revoked:
            self.box[0].commit()  # a blocking call from inside the callback (user thread)

    def on_partitions_assigned(self, assigned):
        self.events.append(("assigned", set(assigned)))


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_rebalance_listener_runs_on_the_polling_thread(bootstrap, make_topic, topic, group, strategy):
    make_topic(topic, 4)
    with Producer(bootstrap_servers=bootstrap) as p:
        for i in range(40):
            p.send(topic, b"%d" % i, partition=i % 4)
    box = []
    rec = Recorder(box)
    first = Member.__new__(Member)
    c1 = Consumer(
        bootstrap_servers=bootstrap, group_id=group, partition_assignment_strategy=[strategy], **GROUP_OPTIONS
    )
    box.append(c1)
    c1.subscribe([topic], listener=rec)
    got = []
    wait_for(lambda: got.extend(c1.poll(0.2)) or len(got) >= 40, 30, "first member reads everything")
    assert ("assigned", {TopicPartition(topic, p) for p in range(4)}) in rec.events
    second = Member(bootstrap, topic, group, strategy)
    try:
        wait_for(
            lambda: (c1.poll(0.2), len(c1.assignment()) == 2 and len(second.assigned) == 2)[1],
            40,
            "two members",
        )
        revoked = [e for e in rec.events if e[0] == "revoked" and e[1]]
        assert revoked, rec.events
        if strategy == "cooperative-sticky":
            assert all(len(e[1]) == 2 for e in revoked)  # only what moved was revoked
        committed = c1.committed([TopicPartition(topic, p) for p in range(4)])
        assert all(om is not None and om.offset == 10 for om in committed.values())
    finally:
        second.close()
        c1.close()
    del first


def test_static_member_restart_keeps_assignment(bootstrap, make_topic, topic, group):
    make_topic(topic, 4)
    a = Member(bootstrap, topic, group, "range", group_instance_id="static-a")
    b = Member(bootstrap, topic, group, "range", group_instance_id="static-b")
    try:
        wait_for(lambda: len(a.assigned) == 2 and len(b.assigned) == 2, 40, "two static members")
        before_a, before_b = set(a.assigned), set(b.assigned)
        generation = a.consumer.group_generation
        b.close()  # static: no LeaveGroup
        b = Member(bootstrap, topic, group, "range", group_instance_id="static-b")
        wait_for(lambda: len(b.assigned) == 2, 20, "the restarted static member's assignment")
        assert b.assigned == before_b and a.assigned == before_a
        assert a.consumer.group_generation == generation
    finally:
        a.close()
        b.close()


def test_pattern_subscription(bootstrap, admin, group):
    prefix = f"pat-{os.urandom(3).hex()}"
    admin.create_topics([(f"{prefix}-a", 1, 1), (f"{prefix}-b", 1, 1), (f"other-{prefix}", 1, 1)])
    with Consumer(bootstrap_servers=bootstrap, group_id=group, **GROUP_OPTIONS) as c:
        c.subscribe(pattern=f"{prefix}-.*")
        wait_for(lambda: (c.poll(0.2), len(c.assignment()) == 2)[1], 30, "pattern assignment")
        assert {tp.topic for tp in c.assignment()} == {f"{prefix}-a", f"{prefix}-b"}
        assert c.subscription() == {f"{prefix}-a", f"{prefix}-b"}


class LossRecorder(ConsumerRebalanceListener):
    def __init__(self):
        self.events = []

    def on_partitions_revoked(self, revoked):
        self.events.append(("revoked", set(revoked)))

    def on_partitions_assigned(self, assigned):
        self.events.append(("assigned", set(assigned)))

    def on_partitions_lost(self, lost):
        self.events.append(("lost", set(lost)))


def test_member_that_stops_polling_leaves_and_loses_its_partitions(bootstrap, admin, make_topic, topic, group):
    """Past max_poll_interval_ms without poll() the heartbeat task leaves the group; the next
    poll() reports the partitions as lost (not revoked: nothing may be committed for them) and
    rejoins."""
    make_topic(topic, 2)
    everything = {TopicPartition(topic, p) for p in range(2)}
    listener = LossRecorder()
    options = {**GROUP_OPTIONS, "max_poll_interval_ms": 1500, "heartbeat_interval_ms": 200}
    with Consumer(bootstrap_servers=bootstrap, group_id=group, **options) as consumer:
        consumer.subscribe([topic], listener=listener)
        wait_for(lambda: (consumer.poll(0.2), consumer.assignment() == everything)[1], 30, "the assignment")
        left = time.monotonic()
        wait_for(lambda: not admin.describe_groups([group])[group].members, 20, "the idle member to leave")
        assert time.monotonic() - left >= 1.0  # not before max_poll_interval_ms
        assert ("lost", everything) not in listener.events
        wait_for(
            lambda: (consumer.poll(0.2), ("lost", everything) in listener.events)[1], 20, "the partitions lost"
        )
        assert ("revoked", everything) not in listener.events
        wait_for(lambda: (consumer.poll(0.2), consumer.assignment() == everything)[1], 30, "the rejoin")
        assert [e for e, _ in listener.events] == ["assigned", "lost", "assigned"]
