"""Online group migration (KIP-848, ``group.consumer.migration.policy``): how long a group of
two classic confluent-kafka consumers (6 partitions) takes to settle when a third member joins
and when it leaves again, with the third member speaking the consumer protocol (the group is
upgraded to a consumer group, then downgraded back) or the classic one (a plain classic
rebalance, for comparison).

* **join** - from the third member's ``subscribe`` until the three members own disjoint
  partitions covering the topic (and, for the consumer protocol, ListGroups says ``consumer``);
* **leave** - from the start of its ``close()`` until the two classic members cover the topic
  again (and the group is ``classic`` again).

Each number is the median (min-max) of ``--runs`` runs, each with a new group and topic on
one broker on 127.0.0.1, heartbeats every 300 ms (classic) and
``group.consumer.heartbeat.interval.ms`` (consumer protocol). Run::

    python benchmarks/group_migration_bench.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from confluent_kafka import Consumer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from odradek.testing.process import BrokerProcess  # noqa: E402

PARTITIONS = 6
OVERRIDES = {
    "group.consumer.heartbeat.interval.ms": 300,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.initial.rebalance.delay.ms": 100,
}


def consumer(bootstrap: str, group: str, protocol: str) -> Consumer:
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
            "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 500}
    if protocol == "classic":
        conf |= {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300}
    return Consumer(conf)


def group_type(admin: AdminClient, group: str) -> str | None:
    listed = admin.list_consumer_groups(request_timeout=5).result()
    for g in listed.valid:
        if g.group_id == group:
            return str(getattr(g, "type", "")).split(".")[-1].lower()
    return None


def covered(consumers: list[Consumer]) -> bool:
    parts = [[tp.partition for tp in c.assignment()] for c in consumers]
    flat = [p for ps in parts for p in ps]
    return all(parts) and sorted(flat) == list(range(PARTITIONS))


def settle(
    consumers: list[Consumer], admin: AdminClient, group: str, want_type: str, timeout: float = 60,
    start: float | None = None,
) -> float:
    """ms from ``start`` (now) until the consumers cover the topic and the group has that type."""
    start = time.monotonic() if start is None else start
    while time.monotonic() - start < timeout:
        for c in consumers:
            c.poll(0.02)
        if covered(consumers) and group_type(admin, group) == want_type:
            return (time.monotonic() - start) * 1000
    raise TimeoutError(f"group {group} did not settle as {want_type}")


def one_run(bootstrap: str, admin: AdminClient, protocol: str) -> tuple[float, float]:
    topic, group = f"mig-{uuid.uuid4().hex[:8]}", f"migg-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(15)
    classics = [consumer(bootstrap, group, "classic") for _ in range(2)]
    for c in classics:
        c.subscribe([topic])
    settle(classics, admin, group, "classic")
    third = consumer(bootstrap, group, protocol)
    t0 = time.monotonic()
    third.subscribe([topic])
    join = settle(classics + [third], admin, group, protocol, start=t0)
    t1 = time.monotonic()
    third.close()
    leave = settle(classics, admin, group, "classic", start=t1)
    for c in classics:
        c.close()
    return join, leave


def fmt(values: list[float]) -> str:
    return f"{statistics.median(values):7.0f} ms ({min(values):.0f}-{max(values):.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, BrokerProcess(os.path.join(tmp, "data"), overrides=OVERRIDES) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        rows = []
        for protocol in ("classic", "consumer"):
            joins, leaves = [], []
            for _ in range(args.runs):
                join, leave = one_run(broker.bootstrap_servers, admin, protocol)
                joins.append(join)
                leaves.append(leave)
            rows.append((protocol, joins, leaves))
    print()
    print(f"two classic members, {PARTITIONS} partitions; a third member joins, then leaves ({args.runs} runs)")
    print(f"{'third member speaks':<30} {'join (group settled)':<28} {'leave (group settled)':<28}")
    for protocol, joins, leaves in rows:
        label = protocol + (" (upgrade/downgrade)" if protocol == "consumer" else "")
        print(f"{label:<30} {fmt(joins):<28} {fmt(leaves):<28}")


if __name__ == "__main__":
    main()
