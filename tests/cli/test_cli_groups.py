"""`odradek groups ...`: lag per partition, and reset-offsets moving committed offsets."""

from __future__ import annotations

import time

import pytest
from cli_helpers import ck_commit, ck_committed, ck_produce


@pytest.fixture
def group_with_lag(odradek, broker, topic_name):
    """A 2-partition topic with 4 + 2 records and a group that committed 1 and 2."""
    assert odradek("topics", "create", topic_name, "-p", "2").code == 0
    ck_produce(
        broker.bootstrap_servers, topic_name, [(None, f"a{i}".encode()) for i in range(4)], partition=0
    )
    ck_produce(
        broker.bootstrap_servers, topic_name, [(None, f"b{i}".encode()) for i in range(2)], partition=1
    )
    group = f"g-{topic_name}"
    ck_commit(broker.bootstrap_servers, group, topic_name, {0: 1, 1: 2})
    return group, topic_name


def test_list_and_describe_show_offsets_and_lag(odradek, group_with_lag):
    group, topic = group_with_lag
    listing = odradek("groups", "list", "-o", "json")
    assert listing.code == 0, listing
    assert [g["state"] for g in listing.json() if g["group"] == group] == ["Empty"]
    r = odradek("groups", "describe", group)
    assert r.code == 0, r
    header, *rows = r.lines()
    assert header.split() == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    assert [row.split()[:6] for row in rows] == [
        [group, topic, "0", "1", "4", "3"],
        [group, topic, "1", "2", "2", "0"],
    ]
    assert f"Consumer group '{group}' has no active members." in r.err
    data = odradek("groups", "describe", "--group", group, "-o", "json").json()
    assert [
        (p["partition"], p["current_offset"], p["log_end_offset"], p["lag"]) for p in data[0]["partitions"]
    ] == [
        (0, 1, 4, 3),
        (1, 2, 2, 0),
    ]
    state = odradek("groups", "describe", group, "--state")
    assert state.code == 0 and "Empty" in state.out
    missing = odradek("groups", "describe", group + "-nope")
    assert missing.code == 1 and "does not exist" in missing.err and "odradek groups list" in missing.err


def test_reset_offsets_dry_run_then_execute(odradek, broker, group_with_lag):
    group, topic = group_with_lag
    dry = odradek("groups", "reset-offsets", group, "--topic", topic, "--to-earliest")
    assert dry.code == 0, dry
    assert "Dry run" in dry.err
    assert [row.split() for row in dry.lines()[1:]] == [
        [group, topic, "0", "1", "0"],
        [group, topic, "1", "2", "0"],
    ]
    assert ck_committed(broker.bootstrap_servers, group, topic, [0, 1]) == {0: 1, 1: 2}  # unchanged

    done = odradek(
        "groups", "reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute"
    )
    assert done.code == 0, done
    assert ck_committed(broker.bootstrap_servers, group, topic, [0, 1]) == {0: 0, 1: 0}

    latest = odradek(
        "groups", "reset-offsets", group, "--all-topics", "--to-latest", "--execute", "-o", "json"
    )
    assert [(p["partition"], p["previous_offset"], p["new_offset"]) for p in latest.json()["partitions"]] == [
        (0, 0, 4),
        (1, 0, 2),
    ]
    assert ck_committed(broker.bootstrap_servers, group, topic, [0, 1]) == {0: 4, 1: 2}

    shifted = odradek(
        "groups", "reset-offsets", group, "--topic", f"{topic}:0", "--shift-by", "-3", "--execute"
    )
    assert shifted.code == 0, shifted
    assert ck_committed(broker.bootstrap_servers, group, topic, [0, 1]) == {0: 1, 1: 2}

    clamped = odradek("groups", "reset-offsets", group, "--topic", topic, "--to-offset", "3", "--execute")
    assert clamped.code == 0, clamped
    assert "higher than the latest" in clamped.err  # partition 1 ends at 2
    assert ck_committed(broker.bootstrap_servers, group, topic, [0, 1]) == {0: 3, 1: 2}

    future = odradek(
        "groups",
        "reset-offsets",
        group,
        "--topic",
        topic,
        "--to-datetime",
        "2999-01-01T00:00:00",
        "--execute",
    )
    assert future.code == 0, future
    assert ck_committed(broker.bootstrap_servers, group, topic, [0, 1]) == {0: 4, 1: 2}
    past = odradek("groups", "reset-offsets", group, "--topic", topic, "--by-duration", "P1D", "--execute")
    assert past.code == 0, past
    assert ck_committed(broker.bootstrap_servers, group, topic, [0, 1]) == {0: 0, 1: 0}


def test_reset_offsets_usage_errors(odradek, group_with_lag):
    group, topic = group_with_lag
    none = odradek("groups", "reset-offsets", group, "--topic", topic)
    assert none.code == 2 and "--to-earliest" in none.err
    two = odradek("groups", "reset-offsets", group, "--topic", topic, "--to-earliest", "--to-latest")
    assert two.code == 2
    scope = odradek("groups", "reset-offsets", group, "--to-earliest")
    assert scope.code == 2 and "--all-topics" in scope.err
    bad_duration = odradek("groups", "reset-offsets", group, "--topic", topic, "--by-duration", "1 hour")
    assert bad_duration.code == 2 and "PT1H" in bad_duration.err


def test_active_group_is_described_and_protected(odradek, broker, topic_name):
    from confluent_kafka import Consumer

    assert odradek("topics", "create", topic_name, "-p", "2").code == 0
    ck_produce(broker.bootstrap_servers, topic_name, [(None, b"x")], partition=0)
    group = f"g-{topic_name}"
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "client.id": "lag-test",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        c.subscribe([topic_name])
        deadline = time.monotonic() + 30
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        assert c.assignment()
        members = odradek("groups", "describe", group, "--members", "--verbose")
        assert members.code == 0, members
        header, row = members.lines()
        assert "CONSUMER-ID" in header and "lag-test" in row and f"{topic_name}(0,1)" in row
        refused = odradek(
            "groups", "reset-offsets", group, "--topic", topic_name, "--to-earliest", "--execute"
        )
        assert refused.code == 1, refused
        assert (
            "inactive" in refused.err
            and "Stable" in refused.err
            and "stop the group's consumers" in refused.err
        )
        busy = odradek("groups", "delete", group)
        assert busy.code == 1, busy
    finally:
        c.close()
    gone = odradek("groups", "delete", group)
    assert gone.code == 0, gone
    assert "was successful" in gone.out
    assert odradek("groups", "delete", group).code == 1


def test_list_and_describe_show_a_consumer_protocol_group(odradek, broker, topic_name):
    from confluent_kafka import Consumer
    from support import wait_until

    assert odradek("topics", "create", topic_name, "-p", "2").code == 0
    group = f"kip848-{topic_name}"
    c = Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "group.protocol": "consumer"}
    )
    try:
        c.subscribe([topic_name])
        wait_until(lambda: len(c.assignment()) == 2, 20, "the assignment", step=lambda: c.poll(0.1))
        listing = odradek("groups", "list", "-o", "json")
        assert [(g["type"], g["state"]) for g in listing.json() if g["group"] == group] == [("consumer", "Stable")]
        state = odradek("groups", "describe", group, "--state")
        assert state.code == 0, state
        assert state.lines()[1].split() == [group, "consumer", "uniform", "Stable", "1"]
        members = odradek("groups", "describe", group, "--members", "--verbose")
        assert members.code == 0, members
        assert members.lines()[1].split()[-2:] == ["2", f"{topic_name}(0,1)"]
    finally:
        c.close()
