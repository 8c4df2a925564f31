"""Connect's group sub-protocol bytes (Kafka's ConnectProtocol / IncrementalCooperativeConnectProtocol
layouts) and the leader's assignment: even spread, revocation of the excess, and the
scheduled.rebalance.max.delay.ms hold on a departed worker's work."""

from __future__ import annotations

import struct
import time

from odradek.connect.connect_assignor import IncrementalAssignor, items_of
from odradek.connect.connect_protocol import (
    Assignment,
    WorkerMetadata,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)
from odradek.connect.kafka_stores import ConfigState, target_state_value


def kstring(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def test_default_metadata_is_version_url_and_config_offset():
    data = encode_metadata("default", WorkerMetadata("http://w1:8083/", 7))
    assert data == struct.pack(">h", 0) + kstring("http://w1:8083/") + struct.pack(">q", 7)
    assert decode_metadata(data) == WorkerMetadata("http://w1:8083/", 7, {})


def test_sessioned_metadata_carries_the_current_allocation():
    meta = WorkerMetadata("http://w1:8083/", 3, {"sink": [-1, 0]})
    data = encode_metadata("sessioned", meta)
    allocation = struct.pack(">hi", 2, 1) + kstring("sink") + struct.pack(">iii", 2, -1, 0)
    assert data == (struct.pack(">h", 2) + kstring("http://w1:8083/") + struct.pack(">q", 3)
                    + struct.pack(">i", len(allocation)) + allocation)
    assert decode_metadata(data) == meta


def test_assignments_round_trip_with_revocations_and_delay():
    a = Assignment(0, "leader-1", "http://w1:8083/", 9, {"a": [-1, 0, 1]}, {"b": [2]}, 1500)
    assert decode_assignment(encode_assignment("compatible", a)) == a
    eager = decode_assignment(encode_assignment("default", a))
    assert (eager.assigned, eager.revoked, eager.delay_ms) == ({"a": [-1, 0, 1]}, {}, 0)


def test_work_spreads_evenly_and_the_excess_is_revoked_for_a_new_worker():
    assignor = IncrementalAssignor(0)
    work = {("a", -1), ("a", 0), ("a", 1), ("b", -1), ("b", 0), ("b", 1)}
    plan, _ = assignor.assign("m1", "u1", 0, work, {"m1": WorkerMetadata("u1", 0)})
    assert items_of(plan["m1"].assigned) == work
    members = {"m1": WorkerMetadata("u1", 0, plan["m1"].assigned), "m2": WorkerMetadata("u2", 0)}
    plan, _ = assignor.assign("m1", "u1", 0, work, members)
    revoked = items_of(plan["m1"].revoked)
    assert len(revoked) == 3 and not plan["m2"].assigned  # revocations first, assignments next round
    members["m1"].allocation = plan["m1"].assigned
    plan, _ = assignor.assign("m1", "u1", 0, work, members)
    assert items_of(plan["m2"].assigned) == revoked and not plan["m1"].revoked


def test_a_departed_workers_work_waits_for_the_delay_then_moves():
    assignor = IncrementalAssignor(300)
    work = {("a", -1), ("a", 0), ("b", -1), ("b", 0)}
    members = {"m1": WorkerMetadata("u1", 0), "m2": WorkerMetadata("u2", 0)}
    plan, _ = assignor.assign("m1", "u1", 0, work, members)
    lost = items_of(plan["m2"].assigned)
    kept = {"m1": WorkerMetadata("u1", 0, plan["m1"].assigned)}
    plan, delay = assignor.assign("m1", "u1", 0, work, kept)
    assert 0 < delay <= 0.3 and plan["m1"].delay_ms > 0 and not (items_of(plan["m1"].assigned) & lost)
    time.sleep(delay + 0.01)
    plan, delay = assignor.assign("m1", "u1", 0, work, kept)
    assert delay == 0 and items_of(plan["m1"].assigned) == work


def test_config_records_apply_as_kafkas_config_topic_reads():
    state = ConfigState()
    state.apply("connector-s", {"properties": {"connector.class": "FileStreamSink"}})
    state.apply("task-s-0", {"properties": {"topics": "t"}})
    assert state.tasks.get("s") is None  # task configs take effect at the commit record
    state.apply("commit-s", {"tasks": 1})
    state.apply("target-state-s", target_state_value("STOPPED"))
    assert state.tasks["s"] == [{"topics": "t"}] and state.targets["s"] == "STOPPED"
    assert target_state_value("STOPPED") == {"state": "PAUSED", "state.v2": "STOPPED"}
    state.apply("connector-s", None)
    assert "s" not in state.connectors and state.offset == 5


def test_a_new_leader_holds_the_dead_leaders_work_by_the_owners_the_status_topic_names():
    # Three workers ran a, b, c; the leader (w1) died. w2, just elected, computed no earlier round:
    # a and its task, which nobody reports, are lost (w1's, by the status topic), not new.
    assignor = IncrementalAssignor(300)
    work = {("a", -1), ("a", 0), ("b", -1), ("b", 0), ("c", -1), ("c", 0)}
    members = {"m2": WorkerMetadata("http://w2:8083/", 0, {"b": [-1, 0]}),
               "m3": WorkerMetadata("http://w3:8083/", 0, {"c": [-1, 0]})}
    owners = {("a", -1): "w1:8083", ("a", 0): "w1:8083", ("b", -1): "w2:8083", ("b", 0): "w2:8083"}
    plan, delay = assignor.assign("m2", "http://w2:8083/", 0, work, members, 7, 6, owners)
    assert 0 < delay <= 0.3 and plan["m3"].delay_ms > 0
    assert items_of(plan["m2"].assigned) == {("b", -1), ("b", 0)}
    assert items_of(plan["m3"].assigned) == {("c", -1), ("c", 0)}
    # Rounds of the same leader keep holding them (the delay counts from the first) ...
    members["m2"].allocation, members["m3"].allocation = plan["m2"].assigned, plan["m3"].assigned
    plan, second_delay = assignor.assign("m2", "http://w2:8083/", 0, work, members, 8, 7, {})
    assert 0 < second_delay <= delay and not items_of(plan["m3"].assigned) & {("a", -1), ("a", 0)}
    # ... until it expires: then they go to the survivors.
    time.sleep(second_delay + 0.01)
    plan, last_delay = assignor.assign("m2", "http://w2:8083/", 0, work, members, 9, 8, {})
    assert last_delay == 0
    assert items_of(plan["m2"].assigned) | items_of(plan["m3"].assigned) == work


def test_a_restarted_worker_gets_its_work_back_and_a_fresh_group_waits_for_nobody():
    assignor = IncrementalAssignor(60_000)
    work = {("a", -1), ("a", 0), ("b", -1), ("b", 0)}
    members = {"m1": WorkerMetadata("http://w1:8083/", 0, {"a": [-1, 0]}),
               "m2": WorkerMetadata("http://w2:8083/", 0, {"b": [-1, 0]})}
    plan, _ = assignor.assign("m1", "http://w1:8083/", 0, work, members, 1, -1, {})
    del members["m2"]
    plan, delay = assignor.assign("m1", "http://w1:8083/", 0, work, members, 2, 1, {})
    assert delay > 0 and items_of(plan["m1"].assigned) == {("a", -1), ("a", 0)}
    # w2 restarts (a new member id, the same host:port) within the delay: b goes back to it at once.
    members["m9"] = WorkerMetadata("http://w2:8083/", 0)
    plan, delay = assignor.assign("m1", "http://w1:8083/", 0, work, members, 3, 2, {})
    assert delay == 0 and items_of(plan["m9"].assigned) == {("b", -1), ("b", 0)}

    # Every worker restarted at once: nobody runs anything, the leader remembers nothing, the
    # status topic names workers long gone: nothing is waited for.
    fresh = IncrementalAssignor(60_000)
    members = {"m5": WorkerMetadata("http://w5:8083/", 0), "m6": WorkerMetadata("http://w6:8083/", 0)}
    plan, delay = fresh.assign("m5", "http://w5:8083/", 0, work, members, 4, -1, {i: "w1:8083" for i in work})
    assert delay == 0 and items_of(plan["m5"].assigned) | items_of(plan["m6"].assigned) == work


def test_revoked_work_goes_to_the_new_worker_though_the_status_topic_still_names_the_old_one():
    # The status topic says w1 runs everything until the new owner reports: the leader must
    # not take that for w1's own work coming back.
    assignor = IncrementalAssignor(60_000)
    work = {("a", -1), ("a", 0), ("b", -1), ("b", 0)}
    members = {"m1": WorkerMetadata("http://w1/", 0, {"a": [-1, 0], "b": [-1, 0]}), "m2": WorkerMetadata("http://w2/", 0)}
    statuses = dict.fromkeys(work, "w1")
    plan, _ = assignor.assign("m1", "http://w1/", 0, work, members, 5, 4, statuses)
    revoked = items_of(plan["m1"].revoked)
    assert len(revoked) == 2 and not plan["m2"].assigned
    members["m1"].allocation = plan["m1"].assigned
    plan, delay = assignor.assign("m1", "http://w1/", 0, work, members, 6, 5, statuses)
    assert delay == 0 and items_of(plan["m2"].assigned) == revoked and not plan["m1"].revoked
