"""Transaction markers for partitions led by other brokers (Kafka's
TransactionMarkerChannelManager).

In a cluster the coordinator's transaction may span partitions this broker does not lead.
``MarkerChannel.write_markers`` has the shape of ``markers.write_markers`` (the coordinator
calls it the same way, over and over until no marker is missing): partitions led here, or
whose leader is unknown, are written locally as before; for the others it sends one
WriteTxnMarkers (v1) per leader and answers REQUEST_TIMED_OUT (retriable) until the leader's
answer is in. The answer wakes the coordinator (``on_result``), whose next round picks the
codes up. A failed connection leaves nothing behind: the next round sends again.
Called from the event loop only.
"""

from __future__ import annotations

import asyncio
import logging

from odradek._tasks import cancel_and_wait
from odradek.broker.txn.markers import write_markers
from odradek.cluster.controller_channel import connect_to_broker
from odradek.net.connection import Connection
from odradek.net.connection_errors import ClientError
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

_LINK_ERRORS = (ClientError, OSError)  # the connection failed or timed out: reconnect

WRITE_TXN_MARKERS_KEY = 27
WRITE_TXN_MARKERS_VERSION = 1
WAITING = int(ErrorCode.request_timed_out)


class MarkerChannel:
    def __init__(self, broker, on_result=lambda: None, request_timeout_ms: int = 30000):
        self.broker = broker
        self.on_result = on_result
        self.request_timeout_ms = request_timeout_ms
        self._results: dict[tuple, int] = {}  # (pid, epoch, committed, (topic, index)) -> code
        self._in_flight: set[tuple] = set()  # (pid, epoch, committed, leader)
        self._connections: dict[int, Connection] = {}
        self._tasks: set[asyncio.Task] = set()

    def write_markers(self, broker, producer_id, producer_epoch, coordinator_epoch, committed, partitions):
        local, remote, leaders = [], {}, {}
        for tp in partitions:
            leader = self._remote_leader(tp)
            if leader is None:
                local.append(tp)
            else:
                leaders[leader.node_id] = leader
                remote.setdefault(leader.node_id, []).append(tp)
        results = write_markers(broker, producer_id, producer_epoch, coordinator_epoch, committed, local) if local else {}
        for node_id, tps in remote.items():
            leader = leaders[node_id]
            missing = []
            for tp in tps:
                code = self._results.pop((producer_id, producer_epoch, committed, tp), None)
                if code is None:
                    missing.append(tp)
                    results[tp] = WAITING
                else:
                    results[tp] = code
            flight = (producer_id, producer_epoch, committed, leader.node_id)
            if missing and flight not in self._in_flight:
                self._in_flight.add(flight)
                task = asyncio.get_running_loop().create_task(
                    self._send(leader, producer_id, producer_epoch, coordinator_epoch, committed, missing),
                    name=f"txn-markers-to-{leader.node_id}",
                )
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                task.add_done_callback(lambda _t, flight=flight: self._in_flight.discard(flight))
        return results

    def _remote_leader(self, tp):
        """The live broker leading ``tp`` when it is not this one; None to write locally."""
        partition = self.broker.replica_manager.partitions.get(tp)
        if partition is not None and partition.is_leader:
            return None
        image = self.broker.image
        topic = image.topics.get(tp[0])
        state = topic.partitions.get(tp[1]) if topic is not None else None
        if state is None or state.leader == self.broker.node_id:
            return None
        return image.brokers.get(state.leader)

    async def _send(self, leader, producer_id, producer_epoch, coordinator_epoch, committed, tps) -> None:
        topics: dict[str, list[int]] = {}
        for topic, index in tps:
            topics.setdefault(topic, []).append(index)
        request = messages.build_request(
            WRITE_TXN_MARKERS_KEY,
            WRITE_TXN_MARKERS_VERSION,
            {
                "markers": [
                    {
                        "producer_id": producer_id,
                        "producer_epoch": producer_epoch,
                        "transaction_result": committed,
                        "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
                        "coordinator_epoch": coordinator_epoch,
                    }
                ]
            },
        )
        try:
            conn = await self._connection(leader)
            response = await conn.send(WRITE_TXN_MARKERS_KEY, request, version=WRITE_TXN_MARKERS_VERSION)
        except _LINK_ERRORS as exc:
            self._connections.pop(leader.node_id, None)
            log.info("transaction markers to broker %d not sent: %s; retrying", leader.node_id, exc)
            return
        for marker in response.markers:
            for t in marker.topics:
                for p in t.partitions:
                    self._results[(producer_id, producer_epoch, committed, (t.name, p.partition_index))] = int(
                        p.error_code
                    )
        self.on_result()

    async def _connection(self, leader) -> Connection:
        conn = self._connections.get(leader.node_id)
        host, port = leader.address(self.broker.config.inter_broker_listener_name)
        if conn is None or conn.closed or (conn.host, conn.port) != (host, port):
            conn = await connect_to_broker(
                host,
                port,
                leader.node_id,
                f"broker-{self.broker.node_id}-txn-markers",
                self.request_timeout_ms,
                self.broker.inter_broker_security,
            )
            self._connections[leader.node_id] = conn
        return conn

    async def close(self) -> None:
        await cancel_and_wait(*self._tasks)
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
