"""Share partitions leave a leader's memory and come back from ``__share_group_state``: after
they sit idle (``share_fetch_manager.IDLE_EVICT_S``, shortened here) and when the partition's
leadership moves to another broker (tests/cluster)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from share_harness import OVERRIDES, polled, setup_group, share_consumer
from support import wait_until

from odradek.broker.share import share_fetch_manager
from odradek.testing import EmbeddedBroker

IDLE_S = 0.5


@pytest.fixture
def broker():
    # locks longer than the test, so a record held by a member stays acquired while it is idle
    with EmbeddedBroker(overrides={**OVERRIDES, "group.share.record.lock.duration.ms": 60000}) as b:
        yield b


def read_all(c, expected: set[bytes]) -> list[bytes]:
    read: list[bytes] = []
    wait_until(lambda: set(read) >= expected, 20, "the records", step=lambda: read.extend(m.value() for m in polled(c)))
    return read


def test_an_idle_share_partition_is_evicted_and_its_state_comes_back_but_one_with_acquired_records_stays(
    broker, monkeypatch
):
    fetches = broker.broker.share_fetches
    topic, done_group, values = setup_group(broker, 10)
    c = share_consumer(broker, done_group, topic)
    assert sorted(read_all(c, values)) == sorted(values)
    for _ in range(3):
        assert polled(c) == []  # acknowledges (implicitly) what it read
    c.close()

    _, holding_group, _ = setup_group(broker, 0)
    holder = share_consumer(broker, holding_group, topic, **{"share.acknowledgement.mode": "explicit"})
    held = read_all(holder, values)  # acquired, never acknowledged
    assert held
    done_key, holding_key = (done_group, topic, 0), (holding_group, topic, 0)
    assert done_key in fetches.partitions and holding_key in fetches.partitions

    monkeypatch.setattr(share_fetch_manager, "IDLE_EVICT_S", IDLE_S)
    monkeypatch.setattr(share_fetch_manager, "SWEEP_S", 0)
    wait_until(
        lambda: all(time.monotonic() - fetches._used[k] > IDLE_S for k in (done_key, holding_key)),
        10, "both share partitions idle",
    )
    # the sweep runs when a share partition is first needed: a third group starts reading
    _, other_group, _ = setup_group(broker, 0)
    other = share_consumer(broker, other_group, topic)
    wait_until(lambda: done_key not in fetches.partitions, 20, "the idle share partition evicted", step=lambda: polled(other))
    assert holding_key in fetches.partitions  # it still has acquired records
    other.close()

    # the evicted share partition is loaded back from __share_group_state: only new records come
    monkeypatch.setattr(share_fetch_manager, "IDLE_EVICT_S", 600)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    more = {f"late{i}".encode() for i in range(5)}
    for v in sorted(more):
        p.produce(topic, value=v)
    assert p.flush(10) == 0
    again = share_consumer(broker, done_group, topic)
    got = read_all(again, more)
    assert sorted(got) == sorted(more)
    again.close()
    holder.close()
