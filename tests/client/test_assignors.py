"""Assignors without a broker: the seeds' examples and balance/stickiness properties."""

import pytest

from odradek.client.consumer.assignors import (
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    StickyAssignor,
    Subscription,
    decode_sticky_user_data,
    encode_sticky_user_data,
)
from odradek.client.consumer.consumer_protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from odradek.client.structs import TopicPartition as TP


def tps(spec):
    return [TP(t, p) for t, p in spec]


def test_range_two_consumers_two_topics_three_partitions():
    subs = {"C0": Subscription(["t0", "t1"]), "C1": Subscription(["t0", "t1"])}
    out = RangeAssignor().assign({"t0": 3, "t1": 3}, subs)
    assert out["C0"] == tps([("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)])
    assert out["C1"] == tps([("t0", 2), ("t1", 2)])


def test_roundrobin_uneven_subscriptions():
    subs = {
        "C0": Subscription(["t0"]),
        "C1": Subscription(["t0", "t1"]),
        "C2": Subscription(["t0", "t1", "t2"]),
    }
    out = RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3}, subs)
    assert out == {
        "C0": tps([("t0", 0)]),
        "C1": tps([("t1", 0)]),
        "C2": tps([("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)]),
    }


def test_sticky_is_optimal_for_uneven_subscriptions():
    subs = {
        "C0": Subscription(["t0"]),
        "C1": Subscription(["t0", "t1"]),
        "C2": Subscription(["t0", "t1", "t2"]),
    }
    out = StickyAssignor().assign({"t0": 1, "t1": 2, "t2": 3}, subs)
    assert out == {
        "C0": tps([("t0", 0)]),
        "C1": tps([("t1", 0), ("t1", 1)]),
        "C2": tps([("t2", p) for p in range(3)]),
    }


def test_sticky_keeps_partitions_when_a_member_leaves():
    topics = {f"t{i}": 2 for i in range(4)}
    subs = {c: Subscription(list(topics)) for c in ("C0", "C1", "C2")}
    first = StickyAssignor().assign(topics, subs)
    assert sorted(len(v) for v in first.values()) == [2, 3, 3]
    survivors = {
        c: Subscription(list(topics), user_data=encode_sticky_user_data(first[c], 1)) for c in ("C0", "C2")
    }
    second = StickyAssignor().assign(topics, survivors)
    for c in ("C0", "C2"):
        assert set(first[c]) <= set(second[c])
    assert sorted(len(v) for v in second.values()) == [4, 4]


@pytest.mark.parametrize("members", [2, 3, 4, 5])
def test_sticky_balances_growth(members):
    topics = {"t": 6}
    owner = {"m0": tps([("t", p) for p in range(6)])}
    subs = {
        f"m{i}": Subscription(["t"], owned_partitions=owner.get(f"m{i}", []), generation_id=1)
        for i in range(members)
    }
    out = StickyAssignor().assign(topics, subs)
    counts = sorted(len(v) for v in out.values())
    assert counts[-1] - counts[0] <= 1
    assert sum(counts) == 6
    assert len(out["m0"]) == counts[-1]  # the old owner keeps as many as allowed


def test_cooperative_sticky_withholds_partitions_still_owned_elsewhere():
    owned = tps([("t", p) for p in range(6)])
    subs = {"m0": Subscription(["t"], owned_partitions=owned, generation_id=3), "m1": Subscription(["t"])}
    out = CooperativeStickyAssignor().assign({"t": 6}, subs)
    assert len(out["m0"]) == 3 and out["m1"] == []  # m0 revokes 3, the next round gives them to m1
    subs2 = {
        "m0": Subscription(["t"], owned_partitions=out["m0"], generation_id=4),
        "m1": Subscription(["t"]),
    }
    out2 = CooperativeStickyAssignor().assign({"t": 6}, subs2)
    assert out2["m0"] == out["m0"] and len(out2["m1"]) == 3


def test_static_members_sort_by_instance_id():
    subs = {
        "zzz": Subscription(["t"], group_instance_id="a"),
        "aaa": Subscription(["t"], group_instance_id="b"),
    }
    out = RangeAssignor().assign({"t": 2}, subs)
    assert out["zzz"] == [TP("t", 0)]


def test_consumer_protocol_round_trip():
    owned = tps([("a", 1), ("a", 2), ("b", 0)])
    sub = decode_subscription(encode_subscription({"a", "b"}, b"ud", owned))
    assert (
        sorted(sub.topics) == ["a", "b"] and sub.user_data == b"ud" and sorted(sub.owned_partitions) == owned
    )
    assigned, _ = decode_assignment(encode_assignment(owned))
    assert assigned == set(owned)
    parts, gen = decode_sticky_user_data(encode_sticky_user_data(owned, 7))
    assert sorted(parts) == owned and gen == 7
