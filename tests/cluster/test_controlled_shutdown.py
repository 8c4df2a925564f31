"""Controlled shutdown retries (Kafka's ``controlled.shutdown.max.retries`` and
``controlled.shutdown.retry.backoff.ms``): a broker whose leaderships cannot all move asks the
controller again, then shuts down anyway, naming the partitions it left."""

from __future__ import annotations

import re
import time

from odradek.client.blocking import Admin
from odradek.client.structs import NewTopic
from tests.cluster.control_support import cluster_on

BACKOFF_MS = 400


def test_a_broker_retries_a_controlled_shutdown_that_leaves_partitions_then_stops_naming_them(zookeeper):
    overrides = {"controlled.shutdown.max.retries": 3, "controlled.shutdown.retry.backoff.ms": BACKOFF_MS}
    with cluster_on(zookeeper, 3, overrides=overrides) as cluster:
        admin = Admin({"bootstrap.servers": cluster.bootstrap_servers})
        try:
            admin.create_topics(
                [
                    NewTopic("stuck", replica_assignments={0: [1, 2]}),  # its other replica will be gone
                    NewTopic("movable", replica_assignments={0: [1, 3]}),  # can move to broker 3
                    NewTopic("single", replica_assignments={0: [1]}),  # nowhere to go: not asked about
                ]
            )
        finally:
            admin.close()
        cluster.wait_for(
            lambda md: all(t in md.topics and md.topics[t][0].leader == 1 for t in ("stuck", "movable", "single"))
            and md.topics["stuck"][0].isr == (1, 2)
            and md.topics["movable"][0].isr == (1, 3),
            30,
            "the topics led by broker 1 with full ISRs",
        )
        assert cluster.stop(2) == 0  # stuck-0 is left with broker 1 alone in its ISR
        cluster.wait_for(lambda md: md.topics["stuck"][0].isr == (1,), 20, "broker 2 out of stuck-0's ISR")

        started = time.monotonic()
        assert cluster.stop(1) == 0  # it shuts down anyway, cleanly
        elapsed = time.monotonic() - started
        text = cluster.log_text(1)
        attempts = re.findall(r"controlled shutdown attempt (\d) of 3: broker 1 still leads 1 partitions \(stuck-0\)", text)
        assert attempts == ["1", "2", "3"], text[-3000:]
        assert text.count("retrying the controlled shutdown in 400 ms") == 2
        left = [line for line in text.splitlines() if "shutting down without a complete controlled shutdown" in line]
        assert len(left) == 1 and left[0].endswith("stuck-0"), left
        assert elapsed >= 2 * BACKOFF_MS / 1000
        # the movable partition moved on the first attempt; the stuck one still names broker 1
        md = cluster.wait_for(lambda md: md.topics["movable"][0].leader == 3, 20, "movable-0 led by broker 3")
        assert md.topics["stuck"][0].leader in (1, -1)
