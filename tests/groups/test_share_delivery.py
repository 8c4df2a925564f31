"""Share groups as Kafka 4.2's clients use them (issue 26), with confluent-kafka's
ShareConsumer: acknowledgements sent while closing, acquisition locks that run out on the
broker's timer, the delivery limit, read_committed groups, topics deleted and made anew, the
record-lock limit, ShareFetch/ShareAcknowledge v2 and the keys that bound them."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import AcknowledgeType, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from group_raw import RawClient
from share_harness import OVERRIDES, polled, produce, setup_group, share_consumer
from support import set_group_configs, started_broker, wait_until

from odradek.protocol.errors import ErrorCode
from odradek.testing.process import BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    yield from started_broker(tmp_path_factory.mktemp("kip932-42") / "data", OVERRIDES)


def quiet_for(c, seconds: float) -> list:
    """Everything ``c`` receives in ``seconds`` (records that should not come)."""
    got: list = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        got.extend(polled(c))
    return got


@pytest.mark.parametrize("mode", ["implicit", "explicit"])
def test_acknowledgements_sent_while_closing_are_kept(broker, mode):
    """librdkafka leaves the group, then sends its last ShareAcknowledge: the share session
    outlives the membership, so the records stay acknowledged (franz-go's
    TestShareGroupAckOnClose too: accept, close without another poll)."""
    topic, group, values = setup_group(broker, 50)
    c = share_consumer(broker, group, topic, **{"share.acknowledgement.mode": mode})
    read: list = []

    def step():
        got = polled(c)
        if mode == "explicit":
            for m in got:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
        read.extend(m.value() for m in got)

    wait_until(lambda: set(read) >= values, 20, "every record", step=step)
    if mode == "implicit":
        # librdkafka 2.16 turns the last poll's records into ACCEPTs at the next poll or
        # commit, not at close: commit them asynchronously, so they are in flight as it leaves
        c.commit_async()
    c.close()  # explicit: the acceptances go out while closing, after the member left
    other = share_consumer(broker, group, topic)
    try:
        # the lock is 2 s: records whose acknowledgements were lost would be back by then
        assert quiet_for(other, 4.0) == []
    finally:
        other.close()


def test_an_acknowledgement_after_the_lock_ran_out_is_refused_and_the_record_delivered_again(broker):
    topic, group, _ = setup_group(broker, 1)
    slow = share_consumer(broker, group, topic, **{"share.acknowledgement.mode": "explicit"})
    fast = share_consumer(broker, group, topic)
    try:
        held = wait_until(lambda: polled(slow), 20, "the record")
        assert held[0].delivery_count() == 1
        # nobody acknowledges: the broker's timer ends the 2 s lock and the waiting member gets it
        again = wait_until(lambda: polled(fast), 20, "the record after the lock ran out")
        assert [(m.value(), m.delivery_count()) for m in again] == [(b"r0", 2)]
        slow.acknowledge(held[0], AcknowledgeType.ACCEPT)
        results = slow.commit_sync(10)
        [error] = results.values()
        assert isinstance(error, KafkaException) and error.args[0].code() == KafkaError.INVALID_RECORD_STATE
    finally:
        slow.close()
        fast.close()


def test_a_late_acknowledgement_is_refused_before_anyone_fetches_again(broker):
    """No other fetch comes between the lock running out and the acknowledgement: the timer
    alone released the record, so the acknowledgement is INVALID_RECORD_STATE."""
    topic, group, _ = setup_group(broker, 3, share_record_lock_duration_ms="1000")
    with RawClient(broker) as raw:
        wait_until(lambda: raw.request(10, 3, {"key": group, "key_type": 0}).error_code == ErrorCode.none, 10, "a coordinator")
        joined = raw.request(76, 1, {"group_id": group, "member_id": "m1", "member_epoch": 0, "rack_id": None,
                                     "subscribed_topic_names": [topic]})
        tid = joined.assignment.topic_partitions[0].topic_id
        part = [{"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]
        fetched = raw.request(78, 2, fetch_body(group, "m1", 0, part))
        assert fetched.acquisition_lock_timeout.total_seconds() == 1.0
        acquired = fetched.responses[0].partitions[0].acquired_records
        assert [(r.first_offset, r.last_offset) for r in acquired] == [(0, 2)]
        ran_out = time.monotonic() + 1.5
        wait_until(lambda: time.monotonic() > ran_out, 5, "the lock to run out",
                   step=lambda: heartbeat(raw, group, "m1", joined.member_epoch))
        late = raw.request(79, 2, ack_body(group, "m1", 1, tid, 0, 2, 1))
        assert late.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state
        again = raw.request(78, 2, fetch_body(group, "m1", 2, []))
        assert [(r.first_offset, r.delivery_count) for r in again.responses[0].partitions[0].acquired_records] == [(0, 2)]


def heartbeat(raw, group: str, member: str, epoch: int) -> None:
    """Keeps a hand-made member in its group (its session timeout is 3 s)."""
    assert raw.request(76, 1, {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
                               "subscribed_topic_names": None}).error_code == ErrorCode.none
    time.sleep(0.1)


def fetch_body(group, member, epoch, topics, max_records=100, **extra) -> dict:
    return {"group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait": 2000,
            "min_bytes": 1, "max_bytes": 1 << 20, "max_records": max_records, "batch_size": max_records,
            "topics": topics, "forgotten_topics_data": [], **extra}


def ack_body(group, member, epoch, tid, first, last, kind, renew=False) -> dict:
    return {"group_id": group, "member_id": member, "share_session_epoch": epoch, "is_renew_ack": renew,
            "topics": [{"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": first, "last_offset": last, "acknowledge_types": [kind]}]}]}]}


def test_a_record_whose_locks_keep_running_out_is_archived_at_the_groups_delivery_limit(broker):
    topic, group, _ = setup_group(broker, 1, share_delivery_count_limit="2")
    explicit = {"share.acknowledgement.mode": "explicit"}
    first, second, third = (share_consumer(broker, group, topic, **explicit) for _ in range(3))
    try:
        # nobody acknowledges: each lock runs out on the broker's timer and the next one gets it
        assert [m.delivery_count() for m in wait_until(lambda: polled(first), 20, "a delivery")] == [1]
        assert [m.delivery_count() for m in wait_until(lambda: polled(second), 20, "a redelivery")] == [2]
        assert quiet_for(third, 4.0) == []  # archived after its second delivery (the group's limit)
    finally:
        for c in (first, second, third):
            c.close()


def test_a_read_committed_share_group_never_gets_aborted_records(broker):
    topic, committed_group, _ = setup_group(broker, 0, share_isolation_level="read_committed")
    everything_group = f"sg-{uuid.uuid4().hex[:6]}"
    set_group_configs(AdminClient({"bootstrap.servers": broker.bootstrap_servers}), everything_group,
                      share_auto_offset_reset="earliest")
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"tx-{topic}"})
    p.init_transactions(15)
    for values, commit in (([b"c1", b"c2"], True), ([b"a1", b"a2"], False), ([b"c3"], True)):
        p.begin_transaction()
        for v in values:
            p.produce(topic, value=v)
        p.flush(10)
        (p.commit_transaction if commit else p.abort_transaction)(15)
    produce(broker, topic, [b"plain"])
    committed = share_consumer(broker, committed_group, topic)
    uncommitted = share_consumer(broker, everything_group, topic)
    try:
        got: list = []
        wait_until(lambda: b"plain" in got, 20, "the records", step=lambda: got.extend(m.value() for m in polled(committed)))
        got.extend(m.value() for m in quiet_for(committed, 1.0))
        assert sorted(got) == [b"c1", b"c2", b"c3", b"plain"]
        everything: list = []
        wait_until(lambda: b"plain" in everything, 20, "the records",
                   step=lambda: everything.extend(m.value() for m in polled(uncommitted)))
        assert {b"a1", b"a2"} <= set(everything)  # read_uncommitted (the default) gets them
    finally:
        committed.close()
        uncommitted.close()


def test_a_topic_deleted_and_made_anew_starts_its_share_state_afresh(broker):
    topic, group, _ = setup_group(broker, 3)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    c = share_consumer(broker, group, topic, **{"share.acknowledgement.mode": "explicit"})
    try:
        counts = []

        def release_all():
            for m in polled(c):
                counts.append(m.delivery_count())
                c.acknowledge(m, AcknowledgeType.RELEASE)

        wait_until(lambda: 2 in counts, 20, "a second delivery", step=release_all)
    finally:
        c.close()
    admin.delete_topics([topic])[topic].result(15)
    wait_until(lambda: topic not in admin.list_topics(timeout=5).topics, 15, "the topic gone")
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    produce(broker, topic, [b"r0", b"r1", b"r2"])
    again = share_consumer(broker, group, topic)
    try:
        got: list = []
        wait_until(lambda: len(got) >= 3, 20, "the new topic's records", step=lambda: got.extend(polled(again)))
        assert sorted((m.value(), m.delivery_count()) for m in got) == [(b"r0", 1), (b"r1", 1), (b"r2", 1)]
    finally:
        again.close()


def test_share_partition_max_record_locks_caps_the_records_in_flight(broker):
    topic, group, values = setup_group(broker, 300, share_partition_max_record_locks="100")
    holder = share_consumer(broker, group, topic, **{"share.acknowledgement.mode": "explicit"})
    other = share_consumer(broker, group, topic)
    try:
        held = wait_until(lambda: polled(holder), 20, "records")  # explicit: it polls again once they are acknowledged
        assert len(held) == 100 and quiet_for(other, 1.0) == []  # no lock left for anyone
        for m in held:
            holder.acknowledge(m, AcknowledgeType.ACCEPT)
        holder.commit_sync(10)
        rest: list = []
        wait_until(lambda: len(rest) >= 100, 20, "the next 100", step=lambda: rest.extend(polled(other)))
    finally:
        holder.close()
        other.close()


def test_sharefetch_v2_record_limit_and_renew_acknowledgements(broker):
    topic, group, _ = setup_group(broker, 0)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 50})
    for i in range(10):
        p.produce(topic, value=f"v{i}".encode())
    assert p.flush(10) == 0
    with RawClient(broker) as raw:
        wait_until(lambda: raw.request(10, 3, {"key": group, "key_type": 0}).error_code == ErrorCode.none, 10, "a coordinator")
        joined = raw.request(76, 1, {"group_id": group, "member_id": "m1", "member_epoch": 0, "rack_id": None,
                                     "subscribed_topic_names": [topic]})
        tid = joined.assignment.topic_partitions[0].topic_id
        part = [{"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": []}]}]
        # record-limit (ShareAcquireMode 1): exactly MaxRecords records, whatever the batches
        limited = raw.request(78, 2, fetch_body(group, "m1", 0, part, max_records=3, share_acquire_mode=1))
        runs = [(r.first_offset, r.last_offset) for r in limited.responses[0].partitions[0].acquired_records]
        assert sum(b - a + 1 for a, b in runs) == 3 and runs[0][0] == 0
        # RENEW keeps them (v2, IsRenewAck); the answer carries the group's lock duration
        renewed = raw.request(79, 2, ack_body(group, "m1", 1, tid, 0, 2, 4, renew=True))
        assert renewed.error_code == ErrorCode.none and renewed.responses[0].partitions[0].error_code == ErrorCode.none
        assert renewed.acquisition_lock_timeout.total_seconds() == 2.0
        assert raw.request(79, 2, ack_body(group, "m1", 2, tid, 0, 2, 4)).error_code == ErrorCode.invalid_request
        assert raw.request(78, 2, fetch_body(group, "m1", 2, [], share_acquire_mode=7)).error_code == ErrorCode.invalid_request
        accepted = raw.request(79, 2, ack_body(group, "m1", 2, tid, 0, 2, 1))
        assert accepted.responses[0].partitions[0].error_code == ErrorCode.none
        # a group that turned renewals off refuses them
        set_group_configs(AdminClient({"bootstrap.servers": broker.bootstrap_servers}), group,
                          share_renew_acknowledge_enable="false")
        heartbeat(raw, group, "m1", joined.member_epoch)
        more = raw.request(78, 2, fetch_body(group, "m1", 3, [], max_records=1, share_acquire_mode=1))
        [run] = more.responses[0].partitions[0].acquired_records
        refused = raw.request(79, 2, ack_body(group, "m1", 4, tid, run.first_offset, run.last_offset, 4, renew=True))
        assert refused.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state


def test_the_share_keys_are_validated_with_kafkas_bounds(broker, tmp_path):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    group = f"sg-{uuid.uuid4().hex[:6]}"
    for key, bad in (("share.delivery.count.limit", "11"), ("share.partition.max.record.locks", "50"),
                     ("share.record.lock.duration.ms", "500"), ("share.isolation.level", "dirty"),
                     ("share.renew.acknowledge.enable", "maybe")):
        with pytest.raises(KafkaException) as refused:
            set_group_configs(admin, group, **{key.replace(".", "_"): bad})
        assert refused.value.args[0].code() == KafkaError.INVALID_CONFIG, key
    set_group_configs(admin, group, share_delivery_count_limit="10", share_isolation_level="read_committed")
    # a lock duration below the minimum stops the broker, naming the key and its bound
    proc = BrokerProcess(tmp_path / "data", overrides={"group.share.record.lock.duration.ms": 2000})
    with pytest.raises(RuntimeError):
        proc.start()
    assert "group.share.min.record.lock.duration.ms" in proc.log_text()


def test_share_groups_are_on_by_default_and_the_switches_turn_them_off_and_on(broker, tmp_path):
    def share_apis(b) -> set[int]:
        with RawClient(b) as raw:
            answer = raw.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})
        return {k.api_key for k in answer.api_keys} & {76, 77, 78, 79, 90, 91, 92}

    assert share_apis(broker) == {76, 77, 78, 79, 90, 91, 92}  # the module's broker sets no protocols
    off = BrokerProcess(tmp_path / "off", overrides={"group.coordinator.rebalance.protocols": "classic,consumer"}).start()
    try:
        assert share_apis(off) == set()
    finally:
        off.stop()
    # Kafka's internal group.share.enable turns them on whatever the protocol list says
    on = BrokerProcess(tmp_path / "on", overrides={"group.coordinator.rebalance.protocols": "classic,consumer",
                                                   "group.share.enable": "true"}).start()
    try:
        assert share_apis(on) == {76, 77, 78, 79, 90, 91, 92}
    finally:
        on.stop()
