"""Odradek's consumer in cooperative rebalances (KIP-429) against the Odradek broker: under load, and a
commit made in the middle of one."""

from __future__ import annotations

import asyncio
import struct
import threading
import time
import uuid

from gate_proxy import RESPONSE
from group_raw import RawClient

from odradek import Admin, Consumer, Producer, TopicPartition, aio
from odradek.client.client_errors import CommitFailedError
from odradek.client.consumer.assignors import CooperativeStickyAssignor, Subscription
from odradek.protocol.errors import RebalanceInProgressError

SYNC = 14

# Session and rebalance timeouts far above the deadlines: a rebalance that waits for a member
# the group lost track of shows as a missed deadline, not as a slow pass.
OPTIONS = {
    "session_timeout_ms": 30000,
    "max_poll_interval_ms": 30000,
    "heartbeat_interval_ms": 500,
    "auto_offset_reset": "earliest",
    "enable_auto_commit": False,
    "partition_assignment_strategy": ["cooperative-sticky"],
}
SETTLE_S = 15


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


class CommittingMember:
    """Polls on its own thread and commits what it read after every poll, rebalance or not,
    as applications do; remembers what it owns and read."""

    def __init__(self, broker, topic: str, group: str):
        self.consumer = Consumer(bootstrap_servers=broker.bootstrap_servers, group_id=group, **OPTIONS)
        self.consumer.subscribe([topic])
        self.assigned: set[TopicPartition] = set()
        self.values: set[bytes] = set()
        self.refused = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self.values.update(r.value for r in self.consumer.poll(0.05))
                self.assigned = self.consumer.assignment()
                try:
                    self.consumer.commit()
                except (RebalanceInProgressError, CommitFailedError):
                    self.refused += 1  # between generations: the next commit covers it
        except Exception as exc:  # surfaced by the test
            self.error = exc

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


class SteadyProducer:
    def __init__(self, broker, topic: str):
        self.produced: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(broker.bootstrap_servers, topic), daemon=True)
        self._thread.start()

    def _run(self, bootstrap: str, topic: str) -> None:
        with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
            while not self._stop.is_set():
                value = b"%d" % len(self.produced)
                p.send(topic, value)
                self.produced.append(value)
                if len(self.produced) % 100 == 0:
                    time.sleep(0.01)
            p.flush()

    def stop(self) -> set[bytes]:
        self._stop.set()
        self._thread.join(30)
        return set(self.produced)


def join_and_leave_under_load(broker) -> None:
    topic, group = f"coop-{uuid.uuid4().hex[:8]}", f"g-coop-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=broker.bootstrap_servers) as admin:
        admin.create_topics([(topic, 6, 1)])
    partitions = {TopicPartition(topic, p) for p in range(6)}
    producer = SteadyProducer(broker, topic)
    members: list[CommittingMember] = []
    try:
        a = CommittingMember(broker, topic, group)
        members.append(a)
        wait_for(lambda: a.assigned == partitions, SETTLE_S, "the first member owns every partition")
        b = CommittingMember(broker, topic, group)
        members.append(b)
        wait_for(
            lambda: len(a.assigned) == len(b.assigned) == 3 and a.assigned | b.assigned == partitions,
            SETTLE_S,
            "two members with 3 partitions each",
        )
        b.close()  # leaves the group
        wait_for(lambda: a.assigned == partitions, SETTLE_S, "the survivor owns every partition again")
        want = producer.stop()
        wait_for(lambda: want <= a.values | b.values, SETTLE_S, f"all {len(want)} produced records consumed")
        assert a.error is None and b.error is None, (a.error, b.error)
    finally:
        producer.stop()
        for m in members:
            try:
                m.close()
            except Exception:
                pass


def test_cooperative_sticky_revokes_and_reassigns_after_member_leaves(group_broker):
    """Two cooperative-sticky members under a steady produce load, committing as they go; the
    second joins (partitions move in two steps: revoke, then assign), then leaves. Each step
    settles well within the members' session and rebalance timeouts and every produced record
    is consumed. (A commit between generations used to cost a member its id: the group then
    waited a session timeout for the old id, while the member rejoined under a new one
    claiming the partitions it held.)"""
    for _ in range(2):
        join_and_leave_under_load(group_broker)


def describe(broker, group: str):
    with RawClient(broker) as raw:
        return raw.request(15, 5, {"groups": [group]}).groups[0]


def test_commit_during_rebalance_keeps_the_member_in_the_group(gated):
    """A commit while the member rejoins is refused at once (RebalanceInProgressError), as
    Kafka's client does. It used to go out without a generation; the broker's UNKNOWN_MEMBER_ID
    answer, arriving after the member had finished the rebalance, made the member drop its id
    and join again as a new member, and the group waited a session timeout for the old one.
    The proxy holds the SyncGroup answer, so the commit lands inside the rebalance every time."""
    topic, other, group = gated.create_topic(2), gated.create_topic(1), f"g-commit-{uuid.uuid4().hex[:8]}"
    with Producer(bootstrap_servers=gated.bootstrap) as p:
        for i in range(20):
            p.send(topic, b"%d" % i, partition=i % 2)

    async def main():
        async with aio.Consumer(bootstrap_servers=gated.bootstrap, group_id=group, **OPTIONS) as c:
            c.subscribe([topic])
            read = []
            deadline = time.monotonic() + SETTLE_S
            while len(read) < 20:
                assert time.monotonic() < deadline, "the member did not read the topic"
                read += await c.poll(0.2)
            member, generation = c.member_id, c.group_generation
            gate = gated.proxy.hold(RESPONSE, SYNC)
            c.subscribe([topic, other])  # the member rejoins (cooperative: keeping its partitions)
            try:
                await asyncio.to_thread(gate.wait_closed, SETTLE_S)
                commit = asyncio.ensure_future(c.commit())
                await asyncio.sleep(0)  # a commit that goes out at all is on the wire now
            finally:
                gate.release()
            (refused,) = await asyncio.gather(commit, return_exceptions=True)
            deadline = time.monotonic() + SETTLE_S
            # The broker is Stable once it answers SyncGroup; the member, once it has read that answer.
            while (
                described := await asyncio.to_thread(describe, gated.broker, group)
            ).group_state != "Stable" or c.group_generation == generation:
                assert time.monotonic() < deadline, (
                    f"the group is stuck in {described.group_state}, the member in generation {c.group_generation}"
                )
                await c.poll(0.1)
            assert [m.member_id for m in described.members] == [member], "the member changed its id"
            assert c.member_id == member and c.group_generation > generation
            assert isinstance(refused, RebalanceInProgressError), refused
            await c.commit()
            committed = await c.committed([TopicPartition(topic, p) for p in range(2)])
            assert {tp.partition: om.offset for tp, om in committed.items()} == {0: 10, 1: 10}

    asyncio.run(main())


def test_cooperative_sticky_keeps_a_partition_with_its_owner_over_a_stale_claim():
    """Two members claim partition 0: its owner in generation 5 and one whose claim is left over
    from generation 3. The owner keeps it, whichever order the members come in; it used to
    depend on that order, and in one the owner had to revoke a partition it rightly held."""
    t = [TopicPartition("t", p) for p in range(4)]
    owner = Subscription(["t"], struct.pack(">i", 5), t[:2])
    stale = Subscription(["t"], struct.pack(">i", 3), [t[0], t[2], t[3]])
    for subscriptions in ({"X": owner, "Y": stale}, {"Y": stale, "X": owner}):
        result = CooperativeStickyAssignor().assign({"t": 4}, subscriptions)
        assert result == {"X": t[:2], "Y": t[2:]}
