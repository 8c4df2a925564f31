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
