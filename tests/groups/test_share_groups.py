"""Share groups (KIP-932) with confluent-kafka's ShareConsumer, and hand-made requests for the
errors a real client does not provoke."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from confluent_kafka import AcknowledgeType, Producer
from group_raw import RawClient
from share_harness import OVERRIDES, polled, setup_group, share_consumer
from support import started_broker, wait_until

from odradek.protocol.errors import ErrorCode
from odradek.testing.process import BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    yield from started_broker(tmp_path_factory.mktemp("kip932") / "data", OVERRIDES)


def test_consumers_on_one_partition_each_get_every_record_once(broker):
    topic, group, values = setup_group(broker, 300)
    consumers = [share_consumer(broker, group, topic) for _ in range(3)]
    read: dict[int, list[bytes]] = {i: [] for i in range(3)}

    def poll_all():
        for i, c in enumerate(consumers):
            read[i].extend(m.value() for m in polled(c, 0.05))

    wait_until(lambda: sum(len(v) for v in read.values()) >= len(values), 30, "every record", step=poll_all)
    for _ in range(5):
        poll_all()  # nothing comes twice once all are accepted (implicitly, on the next poll)
    everything = [v for vs in read.values() for v in vs]
    assert sorted(everything) == sorted(values)
    for c in consumers:
        c.close()


def test_released_records_are_delivered_again_until_the_delivery_limit_archives_them(broker):
    topic, group, values = setup_group(broker, 1)
    c = share_consumer(broker, group, topic, **{"share.acknowledgement.mode": "explicit"})
    deliveries = 0
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and deliveries < 3:
        for m in polled(c):
            assert m.value() == b"r0"
            deliveries += 1
            c.acknowledge(m, AcknowledgeType.RELEASE)
    assert deliveries == 3  # group.share.delivery.count.limit
    c.commit_sync()
    end = time.monotonic() + 2  # archived: never delivered again
    while time.monotonic() < end:
        assert polled(c) == []
    c.close()


MEMBER = textwrap.dedent(
    """
    import sys
    from confluent_kafka import ShareConsumer
    c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([sys.argv[3]])
    while True:
        got = [m for m in c.poll(0.2) or [] if m.error() is None]
        if got:
            print(len(got), flush=True)
            break
    sys.stdin.read()  # holds its records, never acknowledges, until killed
    """
)


def test_a_killed_consumers_records_come_back_after_the_lock(broker):
    topic, group, values = setup_group(broker, 20)
    proc = subprocess.Popen(
        [sys.executable, "-c", MEMBER, broker.bootstrap_servers, group, topic],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        held = int(proc.stdout.readline())
        assert held > 0
        proc.kill()
        proc.wait()
        c = share_consumer(broker, group, topic)
        read: list[bytes] = []
        wait_until(lambda: set(read) >= values, 20, "the killed member's records", step=lambda: read.extend(
            m.value() for m in polled(c)))
        c.close()
    finally:
        proc.kill()
        proc.wait()


def _share_heartbeat(raw, group: str, member: str, epoch: int, topics=None):
    return raw.request(76, 1, {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
                               "subscribed_topic_names": topics})


def test_bad_share_requests_get_kafkas_error_codes(broker):
    topic, group, _ = setup_group(broker, 5)
    with RawClient(broker) as raw:
        wait_until(lambda: raw.request(10, 3, {"key": group, "key_type": 0}).error_code == ErrorCode.none, 10, "a coordinator")
        joined = _share_heartbeat(raw, group, "m1", 0, [topic])
        assert joined.error_code == ErrorCode.none and joined.member_epoch >= 1
        assert _share_heartbeat(raw, group, "m1", joined.member_epoch + 5).error_code == ErrorCode.fenced_member_epoch
        assert _share_heartbeat(raw, group, "nobody", 1).error_code == ErrorCode.unknown_member_id
        tid = joined.assignment.topic_partitions[0].topic_id
        fetch = {"group_id": group, "member_id": "m1", "max_wait": 500, "min_bytes": 1, "max_bytes": 1 << 20,
                 "max_records": 2, "batch_size": 2, "forgotten_topics_data": []}
        missing = raw.request(78, 1, {**fetch, "share_session_epoch": 3, "topics": []})
        assert missing.error_code == ErrorCode.share_session_not_found
        first = raw.request(78, 1, {**fetch, "share_session_epoch": 0, "topics": [
            {"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]})
        acquired = first.responses[0].partitions[0].acquired_records
        assert first.error_code == ErrorCode.none and acquired and acquired[0].first_offset == 0
        assert raw.request(78, 1, {**fetch, "share_session_epoch": 7, "topics": []}).error_code == (
            ErrorCode.invalid_share_session_epoch
        )

        def ack(epoch, first_offset, last_offset, kind=1):
            return raw.request(79, 1, {"group_id": group, "member_id": "m1", "share_session_epoch": epoch, "topics": [
                {"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                    {"first_offset": first_offset, "last_offset": last_offset, "acknowledge_types": [kind]}]}]}]})

        last = acquired[-1].last_offset
        assert ack(1, 0, last).responses[0].partitions[0].error_code == ErrorCode.none
        again = ack(2, 0, last)  # already acknowledged
        assert again.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state
        never = ack(3, last + 1, last + 1)  # never acquired
        assert never.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state
        # a share heartbeat for a group of another type
        consumer_group = f"cg-{uuid.uuid4().hex[:6]}"
        wait_until(lambda: raw.request(10, 3, {"key": consumer_group, "key_type": 0}).error_code == ErrorCode.none, 10,
                   "a coordinator")
        commit = {"group_id": consumer_group, "generation_id_or_member_epoch": -1, "member_id": "",
                  "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                      {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                       "committed_metadata": ""}]}]}
        assert raw.request(8, 9, commit).topics[0].partitions[0].error_code == ErrorCode.none
        assert _share_heartbeat(raw, consumer_group, "m1", 0, [topic]).error_code == ErrorCode.group_id_not_found
        described = raw.request(77, 1, {"group_ids": [group], "include_authorized_operations": False}).groups[0]
        assert described.error_code == ErrorCode.none and [m.member_id for m in described.members] == ["m1"]


def test_share_groups_cli_lists_and_describes_a_group(broker):
    topic, group, _ = setup_group(broker, 1)
    c = share_consumer(broker, group, topic)
    try:
        wait_until(lambda: polled(c), 20, "the record", interval=0)

        def odradek(*args):
            return subprocess.run(
                [sys.executable, "-m", "odradek", *args, "--bootstrap-server", broker.bootstrap_servers, "-o", "json"],
                capture_output=True, text=True, timeout=60,
            )

        listed = odradek("share-groups", "list")
        assert listed.returncode == 0, listed.stderr
        assert {"group": group, "state": "Stable"} in json.loads(listed.stdout)
        described = odradek("share-groups", "describe", "--group", group, "--members")
        assert described.returncode == 0, described.stderr
        data = json.loads(described.stdout)
        assert data["state"] == "Stable" and data["members"][0]["assignment"] == [{"topic": topic, "partition": 0}]
        state = json.loads(odradek("share-groups", "describe", group, "--state").stdout)
        assert state == {"group": group, "state": "Stable", "members": 1}
        missing = odradek("share-groups", "describe", "nope-" + group)
        assert missing.returncode == 1 and "does not exist" in missing.stderr
        busy = odradek("share-groups", "delete", group)
        assert busy.returncode == 1 and "NON_EMPTY_GROUP" in busy.stderr
        c.close()
        wait_until(lambda: json.loads(odradek("share-groups", "describe", group, "--state").stdout)["state"] == "Empty", 10, "empty")
        deleted = odradek("share-groups", "delete", group)
        assert deleted.returncode == 0, deleted.stderr
        assert group not in {g["group"] for g in json.loads(odradek("share-groups", "list").stdout)}
    finally:
        c.close()


def test_acknowledged_records_stay_acknowledged_through_a_broker_restart(tmp_path):
    proc = BrokerProcess(tmp_path / "data", overrides=OVERRIDES).start()
    try:
        topic, group, values = setup_group(proc, 10)
        c = share_consumer(proc, group, topic)
        read: list[bytes] = []
        wait_until(lambda: set(read) >= values, 20, "the first records", step=lambda: read.extend(
            m.value() for m in polled(c)))
        for _ in range(3):
            assert polled(c) == []  # the next polls acknowledge (implicitly) what it read
        c.close()
        proc.stop()
        proc.start()
        p = Producer({"bootstrap.servers": proc.bootstrap_servers})
        more = {f"s{i}".encode() for i in range(5)}
        for v in sorted(more):
            p.produce(topic, value=v)
        assert p.flush(10) == 0
        # the share partition's start offset came back from __share_group_state: only the new
        # records come (the group config is gone, so without it the group would start at the end)
        c = share_consumer(proc, group, topic)
        again: list[bytes] = []
        wait_until(lambda: set(again) >= more, 20, "the new records", step=lambda: again.extend(
            m.value() for m in polled(c)))
        assert sorted(again) == sorted(more)
        c.close()
    finally:
        proc.stop()


def test_a_waiting_share_fetch_gets_records_produced_or_released_while_it_waits(broker):
    topic, group, _ = setup_group(broker, 0)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    with RawClient(broker) as a, RawClient(broker) as b:
        wait_until(lambda: a.request(10, 3, {"key": group, "key_type": 0}).error_code == ErrorCode.none, 10, "a coordinator")
        tid = _share_heartbeat(a, group, "ma", 0, [topic]).assignment.topic_partitions[0].topic_id
        assert _share_heartbeat(a, group, "mb", 0, [topic]).error_code == ErrorCode.none
        part = [{"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]

        def fetch(member, epoch, topics, wait_ms=5000):
            return {"group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait": wait_ms,
                    "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100, "batch_size": 100,
                    "topics": topics, "forgotten_topics_data": []}

        # an empty partition: ma's fetch parks; a record produced meanwhile completes it
        a.send(78, 1, fetch("ma", 0, part))
        p.produce(topic, value=b"first")
        assert p.flush(10) == 0
        _, got = a.receive(78, 1)
        acquired = got.responses[0].partitions[0].acquired_records
        assert got.error_code == ErrorCode.none and [(r.first_offset, r.last_offset) for r in acquired] == [(0, 0)]
        # mb's fetch parks (ma holds the only record); ma RELEASEs it and mb gets it, delivery 2
        assert not b.request(78, 1, fetch("mb", 0, part, 0)).responses[0].partitions[0].acquired_records
        b.send(78, 1, fetch("mb", 1, []))
        released = a.request(79, 1, {"group_id": group, "member_id": "ma", "share_session_epoch": 1, "topics": [
            {"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": 0, "last_offset": 0, "acknowledge_types": [2]}]}]}]})
        assert released.responses[0].partitions[0].error_code == ErrorCode.none
        _, got = b.receive(78, 1)
        acquired = got.responses[0].partitions[0].acquired_records
        assert [(r.first_offset, r.delivery_count) for r in acquired] == [(0, 2)]


def test_share_groups_cli_reset_offsets_redelivers_from_earliest_and_skips_to_latest(broker):
    topic, group, values = setup_group(broker, 10)

    def odradek(*args):
        return subprocess.run(
            [sys.executable, "-m", "odradek", *args, "--bootstrap-server", broker.bootstrap_servers, "-o", "json"],
            capture_output=True, text=True, timeout=60,
        )

    def read_all(expected: set[bytes]) -> list[bytes]:
        c = share_consumer(broker, group, topic)
        got: list[bytes] = []
        try:
            wait_until(lambda: set(got) >= expected, 20, "the records", step=lambda: got.extend(
                m.value() for m in polled(c)))
            assert polled(c) == []  # acknowledges (implicitly) what it read
            busy = odradek("share-groups", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
            assert busy.returncode == 1 and "member" in busy.stderr
        finally:
            c.close()
        wait_until(lambda: json.loads(odradek("share-groups", "describe", group, "--state").stdout)["state"] == "Empty", 10,
                   "the group empty")
        return got

    assert sorted(read_all(values)) == sorted(values)
    dry = odradek("share-groups", "reset-offsets", group, "--topic", topic, "--to-earliest")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["executed"] is False
    reset = odradek("share-groups", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
    assert reset.returncode == 0, reset.stderr
    assert json.loads(reset.stdout)["partitions"] == [
        {"group": group, "topic": topic, "partition": 0, "new_start_offset": 0}]
    assert sorted(read_all(values)) == sorted(values)  # every record again
    assert odradek("share-groups", "reset-offsets", group, "--topic", topic, "--to-latest", "--execute").returncode == 0
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for v in (b"late1", b"late2"):
        p.produce(topic, value=v)
    assert p.flush(10) == 0
    assert sorted(read_all({b"late1", b"late2"})) == [b"late1", b"late2"]
    with RawClient(broker) as raw:
        def alter(group_id, offset):
            return raw.request(91, 0, {"group_id": group_id, "topics": [
                {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": offset}]}]})
        assert alter(group, 999).responses[0].partitions[0].error_code == ErrorCode.offset_out_of_range
        classic = f"classic-{uuid.uuid4().hex[:6]}"
        wait_until(lambda: raw.request(10, 3, {"key": classic, "key_type": 0}).error_code == ErrorCode.none, 10,
                   "a coordinator")
        commit = {"group_id": classic, "generation_id_or_member_epoch": -1, "member_id": "",
                  "group_instance_id": None, "topics": [{"name": topic, "partitions": [
                      {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                       "committed_metadata": ""}]}]}
        assert raw.request(8, 9, commit).topics[0].partitions[0].error_code == ErrorCode.none
        assert alter(classic, 0).error_code == ErrorCode.group_id_not_found
