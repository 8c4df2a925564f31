"""Brokers replicating without a controller: the test plays the controller.

``ReplicaSet`` starts N real brokers (embedded, each on its own event loop and port, with
replication enabled) and tells them what they lead and follow with LeaderAndIsr and
StopReplica requests shaped as Kafka's (v5+ fields), exactly what the controller sends.
The topic's metadata (what UpdateMetadata would bring) is put in each broker's image.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

from odradek.testing import EmbeddedBroker

FAST = {
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "100",
    "replica.lag.time.max.ms": "2000",
    "auto.create.topics.enable": "false",
}


def partition_state(topic: str, index: int, leader: int, leader_epoch: int, isr, replicas, zk_version=0):
    return SimpleNamespace(
        topic_name=topic,
        partition_index=index,
        controller_epoch=1,
        leader=leader,
        leader_epoch=leader_epoch,
        isr=list(isr),
        partition_epoch=zk_version,
        replicas=list(replicas),
        adding_replicas=[],
        removing_replicas=[],
        is_new=False,
        leader_recovery_state=0,
    )


class ReplicaSet:
    def __init__(self, n: int = 3, overrides: dict | None = None, zk_connect: str | None = None, racks=None):
        self.overrides = {**FAST, **(overrides or {})}
        self.brokers = {
            i: EmbeddedBroker(
                node_id=i, overrides={**self.overrides, **({"broker.rack": racks[i - 1]} if racks else {})}
            )
            for i in range(1, n + 1)
        }
        self.controller_epoch = 1
        self.zk_connect = zk_connect  # leaders write ISR changes there (else they apply them alone)
        self._zk: dict[int, object] = {}

    def __enter__(self) -> ReplicaSet:
        for node_id in self.brokers:
            self.start(node_id)
        self.register_brokers()
        return self

    def register_brokers(self) -> None:
        """Every live broker's image lists every live broker (what UpdateMetadata brings)."""
        from odradek.cluster.metadata_image import BrokerInfo

        live = {i: (b.port, b.overrides.get("broker.rack")) for i, b in self.brokers.items() if b.running}

        def apply(broker):
            broker.image.brokers.clear()
            for i, (port, rack) in live.items():
                broker.image.brokers[i] = BrokerInfo(i, "127.0.0.1", port, rack)

        for b in self.brokers.values():
            if b.running:
                b.call(apply)

    def __exit__(self, *exc) -> None:
        for node_id, b in self.brokers.items():
            if b.running:
                self.stop(node_id)

    def start(self, node_id: int) -> None:
        b = self.brokers[node_id]
        b.start()
        updater = None
        if self.zk_connect:
            from odradek.broker.isr_updater import IsrUpdater
            from odradek.cluster.zk_client import ZkClient

            async def connect():
                return await ZkClient(self.zk_connect, session_timeout_ms=6000).start()

            zk = self._zk[node_id] = self.run(node_id, connect)
            updater = IsrUpdater(zk)
        b.call(lambda broker: broker.enable_replication(updater))

    def stop(self, node_id: int) -> None:
        zk = self._zk.pop(node_id, None)
        if zk is not None:
            self.run(node_id, zk.close)
        self.brokers[node_id].stop()

    def run(self, node_id: int, coro_fn, timeout: float = 30.0):
        """Run ``coro_fn()`` on broker ``node_id``'s event loop and return its result."""
        import asyncio

        return asyncio.run_coroutine_threadsafe(coro_fn(), self.brokers[node_id]._loop).result(timeout)

    def bootstrap(self, node_id: int) -> str:
        return self.brokers[node_id].bootstrap_servers

    def create_topic(
        self, name: str, assignment: dict[int, list[int]], configs: dict | None = None, internal: bool = False
    ) -> None:
        """The topic in every live broker's metadata image (what UpdateMetadata brings)."""
        for b in self.brokers.values():
            if b.running:
                b.call(
                    lambda broker: broker.store.create_topic(
                        name, len(assignment), assignment, {k: str(v) for k, v in (configs or {}).items()}, internal
                    )
                    if name not in broker.image.topics
                    else None
                )

    def leader_and_isr(self, states: list, to: list[int] | None = None, metadata: bool = True) -> dict[int, tuple]:
        """Send LeaderAndIsr with ``states`` to ``to`` (default: every live replica named),
        then (``metadata``) UpdateMetadata to every live broker."""
        live = [i for i, b in self.brokers.items() if b.running]
        targets = to if to is not None else sorted({r for s in states for r in s.replicas if r in live})
        leaders = [
            SimpleNamespace(broker_id=i, host_name="127.0.0.1", port=self.brokers[i].port)
            for i in sorted({s.leader for s in states})
            if i in live
        ]
        out = {}
        for node_id in targets:
            mine = [s for s in states if node_id in s.replicas]
            topics: dict[str, list] = {}
            for s in mine:
                topics.setdefault(s.topic_name, []).append(s)
            request = SimpleNamespace(
                controller_id=0,
                controller_epoch=self.controller_epoch,
                broker_epoch=-1,
                type=0,
                topic_states=[SimpleNamespace(topic_name=t, partition_states=ps) for t, ps in topics.items()],
                live_leaders=leaders,
            )
            out[node_id] = self.brokers[node_id].call(
                lambda broker, request=request: broker.replica_manager.become_leader_or_follower(request)
            )
        if metadata:
            self.update_metadata(states)
        return out

    def update_metadata(self, states: list) -> None:
        """Every live broker's image learns the new leaders, epochs and ISRs (UpdateMetadata)."""
        from odradek.cluster.metadata_image import PartitionState

        def apply(broker):
            for s in states:
                topic = broker.image.topics.get(s.topic_name)
                if topic is not None:
                    topic.partitions[s.partition_index] = PartitionState(
                        s.leader, s.leader_epoch, list(s.replicas), list(s.isr), s.partition_epoch
                    )

        for b in self.brokers.values():
            if b.running:
                b.call(apply)

    def partition(self, node_id: int, topic: str, index: int = 0):
        """A snapshot of one replica: (leader, epoch, isr, log end offset, high watermark)."""

        def look(broker):
            p = broker.replica_manager.partitions.get((topic, index))
            if p is None:
                return None
            return SimpleNamespace(
                leader=p.state.leader,
                leader_epoch=p.leader_epoch,
                isr=list(p.state.isr),
                leo=p.log_end_offset,
                hw=p.high_watermark,
                log_start=p.log_start_offset,
            )

        return self.brokers[node_id].call(look)

    def batches(self, node_id: int, topic: str, index: int = 0, upto: int | None = None) -> bytes:
        """The raw bytes of the replica's log below ``upto`` (default its log end)."""

        def read(broker):
            p = broker.replica_manager.partitions[(topic, index)]
            end = p.log_end_offset if upto is None else upto
            out = bytearray()
            offset = p.log_start_offset
            while offset < end:
                r = p.log.read(offset, 1 << 20, max_offset=end)
                if r.records is None:
                    break
                data = r.records.read()
                out += data
                from odradek.protocol.batch import iter_headers

                last = offset
                for _, h in iter_headers(data):
                    if h is not None:
                        last = h.base_offset + h.last_offset_delta
                offset = last + 1
            return bytes(out)

        return self.brokers[node_id].call(read)


def wait_for(condition, timeout: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def send(bootstrap: str, api_key: int, entity, version: int, timeout_ms: int = 10000):
    """One request over a real connection (what the controller's channel does)."""
    import asyncio

    from odradek.net.connection import Connection

    host, port = bootstrap.rsplit(":", 1)

    async def go():
        conn = Connection(host, int(port), -1, "test-controller", timeout_ms)
        await conn.connect(5)
        try:
            return await conn.send(api_key, entity, version=version)
        finally:
            conn.close()

    return asyncio.run(go())


def fetch_one(bootstrap: str, version: int, replica_id: int, leader_epoch: int, fetch_offset: int, **partition):
    """One Fetch of partition 0 of topic "t" at ``fetch_offset`` (no wait); its partition answer."""
    from odradek.protocol import messages

    fields = {"partition": 0, "current_leader_epoch": leader_epoch, "fetch_offset": fetch_offset}
    request = messages.build_request(
        1,
        version,
        {
            "replica_id": replica_id,
            "max_wait": 0,
            "min_bytes": 1,
            "topics": [{"topic": "t", "partitions": [{**fields, "partition_max_bytes": 1 << 20, **partition}]}],
            "forgotten_topics_data": [],
        },
    )
    return send(bootstrap, 1, request, version).responses[0].partitions[0]


def leader_and_isr_request(states: list, leaders: dict[int, int], controller_epoch: int = 1, topic_ids=None):
    """A LeaderAndIsr v7 request entity; ``leaders`` maps broker id -> port."""
    from odradek.protocol.inter_broker import leader_and_isr_schema as s

    topics: dict[str, list] = {}
    for st in states:
        topics.setdefault(st.topic_name, []).append(
            s.LeaderAndIsrPartitionState(
                partition_index=st.partition_index,
                controller_epoch=controller_epoch,
                leader=st.leader,
                leader_epoch=st.leader_epoch,
                isr=tuple(st.isr),
                partition_epoch=st.partition_epoch,
                replicas=tuple(st.replicas),
            )
        )
    return s.LeaderAndIsrRequest(
        controller_id=0,
        controller_epoch=controller_epoch,
        topic_states=tuple(
            s.LeaderAndIsrTopicState(topic_name=t, topic_id=(topic_ids or {}).get(t), partition_states=tuple(ps))
            for t, ps in topics.items()
        ),
        live_leaders=tuple(
            s.LeaderAndIsrLiveLeader(broker_id=b, host_name="127.0.0.1", port=p) for b, p in leaders.items()
        ),
    )
