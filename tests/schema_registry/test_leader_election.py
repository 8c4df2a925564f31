"""Several registry instances on one schemas topic: one leader elected through the group
protocol writes, the others forward to it; when it dies another takes over, ids intact."""

from __future__ import annotations

import json

from support import wait_until

from odradek.schema_registry.registry_election import choose_leader


def schema(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": "x", "type": "int"}]})


def is_leader(instance) -> bool:
    return "kafka_schema_registry_master_slave_role 1.0" in instance.request("GET", "/metrics").text


def test_the_first_eligible_member_leads_and_none_when_nobody_may():
    members = {"b": {"port": 2}, "a": {"port": 1, "leader_eligibility": False}, "c": {"port": 3}}
    assert choose_leader(members) == {"version": 1, "error": 0, "leader": "b", "leader_identity": {"port": 2}}
    assert choose_leader({"a": {"leader_eligibility": False}})["error"] == 1


def test_followers_forward_writes_and_a_new_leader_takes_over_after_a_kill(registry_factory):
    first = registry_factory()
    second = registry_factory()
    third = registry_factory(**{"leader.eligibility": "false"})
    ids = {}
    for i, instance in enumerate([first, second, third, first, second, third]):
        ids[f"s{i}"] = instance.ok("POST", f"/subjects/s{i}/versions", {"schema": schema(f"R{i}")})["id"]
    assert sorted(ids.values()) == list(range(1, 7)), "one writer: ids are dense and never collide"
    for instance in (first, second, third):  # every view converges on the same state
        wait_until(lambda inst=instance: inst.ok("GET", "/subjects") == sorted(ids), 30, "the view to catch up")
    configs = [first, second, third]
    third.ok("PUT", "/config", {"compatibility": "FULL"})
    for instance in configs:
        wait_until(lambda inst=instance: inst.ok("GET", "/config")["compatibilityLevel"] == "FULL", 30, "config")
    # kill -9 the leader: the other eligible instance takes over, writes through the ineligible
    # one still succeed, and ids continue above 6 (none is handed out twice).
    leader = next(inst for inst in (first, second) if is_leader(inst))
    follower = second if leader is first else first
    leader.kill()
    wait_until(lambda: is_leader(follower), 60, "the follower to become the leader")
    new_id = wait_until(
        lambda: third.request("POST", "/subjects/after/versions", {"schema": schema("After")}).json().get("id"),
        60,
        "a new leader to answer a forwarded write",
    )
    assert new_id == 7
    assert follower.ok("POST", "/subjects/later/versions", {"schema": schema("Later")})["id"] == 8
    wait_until(lambda: third.request("GET", "/subjects/later/versions/1").status_code == 200, 30, "third's view")
    assert sorted(third.ok("GET", f"/subjects/{s}/versions/1")["id"] for s in [*ids, "after", "later"]) == list(range(1, 9))
    follower.kill()
    # Only an ineligible instance is left: writes fail with the unknown-leader code, reads still work.
    status = wait_until(
        lambda: (r := third.request("POST", "/subjects/late/versions", {"schema": schema("Late")})).status_code >= 500
        and r.json()["error_code"],
        60,
        "writes to stop without an eligible leader",
    )
    assert status in (50003, 50004)
    assert third.ok("GET", "/subjects/s0/versions/1")["id"] == ids["s0"]
