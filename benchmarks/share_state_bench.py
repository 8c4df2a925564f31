"""Share groups in a 3-broker cluster: what a share coordinator on another broker costs.

Records per second that confluent-kafka ShareConsumers of one group read from one partition
(replication factor 3, acks=all), accepting each record explicitly and committing the
acknowledgements after every poll (each commit waits for the state write to reach the ISR of
``__share_group_state``). Two kinds of group, chosen by name:

* **local** - the share coordinator of the group's share partition is its leader's broker;
* **remote** - it is another broker: every state read and write crosses the inter-broker
  listener (``broker/share/share_persister.py``).

A ZooKeeper and three broker processes on 127.0.0.1. Run::

    python benchmarks/share_state_bench.py [--records 5000] [--consumers 1,4]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from odradek.cluster.controller_channel import BrokerLink  # noqa: E402
from odradek.protocol import messages  # noqa: E402
from odradek.testing.embedded_cluster import EmbeddedCluster  # noqa: E402

OVERRIDES = {
    "group.coordinator.rebalance.protocols": "classic,consumer,share",
    "group.share.heartbeat.interval.ms": 500,
    "share.coordinator.state.topic.num.partitions": 3,
    "offsets.topic.num.partitions": 3,
}


def ask(cluster: EmbeddedCluster, node: int, api_key: int, version: int, body: dict):
    b = cluster.brokers[node]

    async def go():
        link = BrokerLink(b.host, b.port, node, "share-state-bench", 10)
        try:
            return await link.request(api_key, version, messages.build_request(api_key, version, body))
        finally:
            link.close()

    return asyncio.run(go())


def share_coordinator(cluster: EmbeddedCluster, node: int, key: str) -> int | None:
    found = ask(cluster, node, 10, 6, {"key_type": 2, "coordinator_keys": [key]}).coordinators[0]
    return found.node_id if found.error_code == 0 else None


def pick_group(cluster: EmbeddedCluster, topic: str, leader: int, local: bool, taken: set[str]) -> str:
    topic_id = ask(cluster, leader, 3, 12, {"topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
                                            "include_topic_authorized_operations": False}).topics[0].topic_id  # fmt: skip
    for i in range(200):
        group = f"{'local' if local else 'remote'}-{i}"
        if group in taken:
            continue
        deadline = time.monotonic() + 30
        while (node := share_coordinator(cluster, leader, f"{group}:{topic_id}:0")) is None:
            if time.monotonic() > deadline:
                raise RuntimeError("no share coordinator")
            time.sleep(0.2)
        if (node == leader) == local:
            return group
    raise RuntimeError("no group name fits")


def read_from_earliest(cluster: EmbeddedCluster, group: str, leader: int) -> None:
    """share.auto.offset.reset=earliest for ``group``, waiting until the leader has it (group
    configs reach the other brokers through ZooKeeper)."""
    admin = AdminClient(cluster.client_config())
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
    admin.incremental_alter_configs([resource])[resource].result(15)
    body = {"resources": [{"resource_type": 32, "resource_name": group, "configuration_keys": ["share.auto.offset.reset"]}],
            "include_synonyms": False, "include_documentation": False}  # fmt: skip
    deadline = time.monotonic() + 30
    while ask(cluster, leader, 32, 4, body).results[0].configs[0].value != "earliest":
        if time.monotonic() > deadline:
            raise RuntimeError(f"broker {leader} never saw the group config of {group}")
        time.sleep(0.1)


def throughput(cluster: EmbeddedCluster, topic: str, group: str, consumers: int, records: int) -> float:
    counts = [0] * consumers
    done = threading.Event()

    def run(i: int) -> None:
        c = ShareConsumer(cluster.client_config(**{"group.id": group, "share.acknowledgement.mode": "explicit", "log_level": 0}))
        c.subscribe([topic])
        while not done.is_set():
            for m in c.poll(0.1) or []:
                if m.error() is None:
                    counts[i] += 1
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync()
            if sum(counts) >= records:
                done.set()
        c.close()

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(consumers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    if not done.wait(300):
        raise RuntimeError(f"share consumers read {sum(counts)} of {records} records")
    elapsed = time.perf_counter() - t0
    for t in threads:
        t.join(15)
    return records / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=5000)
    parser.add_argument("--consumers", default="1,4", help="share consumers per run (comma-separated)")
    parser.add_argument("--runs", type=int, default=3, help="runs per row (a new group each); the median is shown")
    args = parser.parse_args()
    sizes = [int(n) for n in args.consumers.split(",")]
    rows = []
    with EmbeddedCluster(3, overrides=OVERRIDES) as cluster:
        topic = "bench-queue"
        admin = AdminClient(cluster.client_config())
        admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
        view = cluster.wait_for(lambda md: topic in md.topics and len(md.topics[topic][0].isr) == 3, 60, "the topic")
        leader = view.topics[topic][0].leader
        p = Producer(cluster.client_config(**{"acks": "all", "linger.ms": 20}))
        for _ in range(args.records):
            p.produce(topic, value=b"x" * 100)
            p.poll(0)
        p.flush(60)
        taken: set[str] = set()

        def fresh_group(local: bool) -> str:
            group = pick_group(cluster, topic, leader, local, taken)
            taken.add(group)
            read_from_earliest(cluster, group, leader)
            return group

        throughput(cluster, topic, fresh_group(True), 1, args.records)  # warm-up: page cache, connections
        for n in sizes:
            rates: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(args.runs):
                for local in (False, True):
                    rates[local].append(throughput(cluster, topic, fresh_group(local), n, args.records))
            for local in (True, False):
                rows.append((n, "local" if local else "remote", rates[local]))
    print()
    print(f"share group in a 3-broker cluster, one partition (RF 3), {args.records} records of 100 bytes, "
          "explicit ACCEPT and commit_sync after every poll")  # fmt: skip
    print(f"{'share consumers':<16} {'coordinator':<12} {'records/s, median (min-max) of ' + str(args.runs):>34}")
    for n, where, rates in rows:
        print(f"{n:<16} {where:<12} {statistics.median(rates):>10.0f} ({min(rates):.0f}-{max(rates):.0f})")


if __name__ == "__main__":
    main()
