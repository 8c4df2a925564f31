"""franz-go's share-group tests (pkg/kgo/share_test.go), which skip any broker without
ShareFetch/ShareAcknowledge v2, reproduced here with confluent-kafka and hand-made requests
(Go is not part of the test tools): TestShareGroupETL (a chained ETL through two share groups
with reject, release, explicit and implicit acceptance, members coming and going),
TestShareGroupOffsetsAdmin (Alter, Describe and DeleteShareGroupOffsets on an empty group)
and TestShareGroupAckOnClose (``test_share_delivery.py``'s closing test)."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from group_raw import RawClient
from share_harness import OVERRIDES, odradek
from support import set_group_configs, started_broker, wait_until

from odradek.protocol.errors import ErrorCode

TOTAL = 400
REJECT_BELOW = 50  # keys the first level-1 member rejects on first delivery
RELEASE_EVERY = 10


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    yield from started_broker(tmp_path_factory.mktemp("franz-share") / "data", OVERRIDES)


def topics(admin, *partitions: int) -> list[str]:
    names = [f"etl-{uuid.uuid4().hex[:8]}" for _ in partitions]
    futures = admin.create_topics([NewTopic(n, p, 1) for n, p in zip(names, partitions, strict=True)])
    for f in futures.values():
        f.result(15)
    return names


class Level:
    """One share group of the pipeline and what its members saw."""

    def __init__(self, broker, group: str, inputs: list[str], outputs: list[str]):
        self.broker, self.group, self.inputs, self.outputs = broker, group, inputs, outputs
        self.accepted: dict[int, int] = {}  # key -> times accepted
        self.rejected: set[int] = set()
        self.redelivered: set[int] = set()
        self.bad_delivery_counts = 0
        self.released = 0
        self.producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
        self.members: list[tuple[ShareConsumer, str, int]] = []  # (consumer, strategy, polls left)

    def join(self, strategy: str, polls: int = -1) -> ShareConsumer:
        mode = "implicit" if strategy == "auto" else "explicit"
        c = ShareConsumer({"bootstrap.servers": self.broker.bootstrap_servers, "group.id": self.group,
                           "share.acknowledgement.mode": mode})
        c.subscribe(self.inputs)
        self.members.append((c, strategy, polls))
        return c

    def leave(self, c: ShareConsumer) -> None:
        self.members = [m for m in self.members if m[0] is not c]
        c.close()

    def step(self) -> None:
        for c, strategy, polls in list(self.members):
            got = [m for m in c.poll(0.05) or [] if m.error() is None]
            for m in got:
                self._handle(c, strategy, m)
            if got and strategy != "auto":
                c.commit_async()
            if got and polls > 0:
                self.members.remove((c, strategy, polls))
                if polls > 1:
                    self.members.append((c, strategy, polls - 1))
                else:
                    c.close()  # a member that bails out after a few polls

    def _handle(self, c: ShareConsumer, strategy: str, m) -> None:
        key, dc = int(m.key()), m.delivery_count()
        if dc < 1:
            self.bad_delivery_counts += 1
        if dc > 1:
            self.redelivered.add(key)
        if strategy == "reject" and key < REJECT_BELOW and dc <= 1:
            c.acknowledge(m, AcknowledgeType.REJECT)
            self.rejected.add(key)
            return
        releasing = strategy in ("reject", "release-some") and key % RELEASE_EVERY == 0 and dc <= 1
        if releasing or strategy == "release-all":
            c.acknowledge(m, AcknowledgeType.RELEASE)
            self.released += 1
            return
        if strategy != "auto":
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        self.accepted[key] = self.accepted.get(key, 0) + 1
        self.producer.produce(self.outputs[key % 2], key=m.key(), value=m.value())

    def close(self) -> None:
        for c, _, _ in self.members:
            c.close()
        assert self.producer.flush(10) == 0


def test_share_group_etl_through_two_levels(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    in_a, in_b, mid_a, mid_b, out_a, out_b = topics(admin, 3, 1, 3, 1, 3, 1)
    group1, group2 = f"etl1-{uuid.uuid4().hex[:6]}", f"etl2-{uuid.uuid4().hex[:6]}"
    for g in (group1, group2):
        set_group_configs(admin, g, share_auto_offset_reset="earliest")
    body = uuid.uuid4().hex.encode()
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for i in range(TOTAL):
        p.produce(in_a if i % 2 == 0 else in_b, key=str(i).encode(), value=body)
    assert p.flush(10) == 0
    level1 = Level(broker, group1, [in_a, in_b], [mid_a, mid_b])
    level2 = Level(broker, group2, [mid_a, mid_b], [out_a, out_b])
    try:
        # alone first, so that it is the one that sees the low keys and rejects them (and
        # releases every tenth key, which comes back to another member); then it leaves
        rejecter = level1.join("reject")
        wait_until(lambda: len(level1.rejected) >= REJECT_BELOW // 2 and level1.released, 30, "rejections",
                   step=level1.step)
        level1.leave(rejecter)
        releaser = level1.join("release-some")
        level1.join("auto")
        level1.join("explicit")
        level1.join("release-all", polls=3)
        level1.join("auto", polls=1)
        level2.join("auto")
        level2.join("explicit")
        level2.join("auto", polls=2)

        def both():
            level1.step()
            level2.step()

        wait_until(lambda: len(level1.accepted) >= TOTAL // 2, 60, "half of level 1", step=both)
        level1.leave(releaser)  # a member leaves mid-way: the others take its partitions
        level1.join("release-some")

        def expected() -> int:
            return TOTAL - len(level1.rejected - set(level1.accepted))

        wait_until(lambda: len(level1.accepted) >= expected() and len(level2.accepted) >= expected(), 120,
                   "every surviving key through both levels", step=both)
    finally:
        level1.close()
        level2.close()
    purely_rejected = level1.rejected - set(level1.accepted)
    assert purely_rejected and set(level1.accepted) == set(range(TOTAL)) - purely_rejected
    assert set(level2.accepted) == set(level1.accepted)  # every accepted key went on, no rejected one
    assert not purely_rejected & set(level2.accepted)
    assert level1.bad_delivery_counts == level2.bad_delivery_counts == 0
    assert level1.redelivered  # the releases came back


def test_share_group_offsets_admin_on_an_empty_group(broker):
    """Alter, then Describe (one topic, and all of them: Topics null), then Delete, all
    through the group coordinator; a group with no members is made by the alter."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    [topic] = topics(admin, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(20):
        p.produce(topic, value=str(i).encode())
    assert p.flush(10) == 0
    group = f"offsets-{uuid.uuid4().hex[:6]}"
    with RawClient(broker) as raw:
        wait_until(lambda: raw.request(10, 3, {"key": group, "key_type": 0}).error_code == ErrorCode.none, 10,
                   "a coordinator")
        altered = raw.request(91, 0, {"group_id": group, "topics": [
            {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 8}]}]})
        assert altered.error_code == ErrorCode.none
        assert [p.error_code for p in altered.responses[0].partitions] == [ErrorCode.none]

        def start_offset(topics_field):
            [g] = raw.request(90, 1, {"groups": [{"group_id": group, "topics": topics_field}]}).groups
            assert g.error_code == ErrorCode.none
            [t] = [t for t in g.topics if t.topic_name == topic]
            [part] = t.partitions
            assert part.error_code == ErrorCode.none
            return part.start_offset, part.lag

        assert start_offset([{"topic_name": topic, "partitions": [0]}]) == (8, 12)
        assert start_offset(None) == (8, 12)
        deleted = raw.request(92, 0, {"group_id": group, "topics": [{"topic_name": topic}]})
        assert deleted.error_code == ErrorCode.none and [t.error_code for t in deleted.responses] == [ErrorCode.none]
        assert start_offset([{"topic_name": topic, "partitions": [0]}]) == (-1, -1)
        [g] = raw.request(90, 1, {"groups": [{"group_id": group, "topics": None}]}).groups
        assert g.topics == ()  # the group has no share state left
    # the same through the command line, as kafka-share-groups.sh
    dry = odradek(broker, "share-groups", "reset-offsets", group, "--topic", topic, "--to-offset", "5")
    assert dry.returncode == 0, dry.stderr
    reset = odradek(broker, "share-groups", "reset-offsets", group, "--topic", topic, "--to-offset", "5", "--execute")
    assert reset.returncode == 0, reset.stderr
    described = odradek(broker, "share-groups", "describe", "--group", group)
    assert described.returncode == 0, described.stderr
    assert json.loads(described.stdout)["offsets"] == [
        {"group": group, "topic": topic, "partition": 0, "start_offset": 5, "lag": 15}]
    forgot = odradek(broker, "share-groups", "delete-offsets", group, "--topic", topic)
    assert forgot.returncode == 0, forgot.stderr
    assert json.loads(odradek(broker, "share-groups", "describe", group).stdout)["offsets"] == []
