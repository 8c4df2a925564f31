"""Socket buffer sizes (Kafka's ``socket.send.buffer.bytes``, ``socket.receive.buffer.bytes`` and
``replica.socket.receive.buffer.bytes``): -1 keeps the kernel's autotuned buffers (Odradek's
default), a size is set with SO_SNDBUF / SO_RCVBUF, which Linux doubles. A real broker with
small buffers still moves every byte, as a client and as a follower."""

from __future__ import annotations

import socket
import sys

import confluent_kafka
import pytest

from odradek.net.socket_buffers import OS_DEFAULT, set_buffer_sizes
from odradek.testing import EmbeddedBroker
from tests.cluster.replication_support import ReplicaSet, partition_state, wait_for
from tests.cluster.test_replication import _produce

SMALL = 16384
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux doubles the size asked for")


def _buffers(sock) -> tuple[int, int]:
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF), sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)


@linux_only
def test_set_buffer_sizes_sets_what_is_given_and_leaves_minus_one_to_the_os():
    with socket.socket() as plain, socket.socket() as tuned:
        before = _buffers(plain)
        set_buffer_sizes(plain, OS_DEFAULT, OS_DEFAULT)
        assert _buffers(plain) == before
        set_buffer_sizes(tuned, send_bytes=SMALL)
        assert _buffers(tuned) == (2 * SMALL, before[1])
        set_buffer_sizes(tuned, receive_bytes=SMALL)
        assert _buffers(tuned) == (2 * SMALL, 2 * SMALL)


def _accepted_buffers(broker) -> list[tuple[int, int]]:
    return broker.call(
        lambda b: [_buffers(c.transport.get_extra_info("socket")) for c in b.network.connections if c.transport]
    )


@linux_only
def test_a_broker_with_small_socket_buffers_sets_them_and_still_moves_every_byte():
    overrides = {"socket.send.buffer.bytes": SMALL, "socket.receive.buffer.bytes": SMALL}
    with EmbeddedBroker(overrides=overrides) as broker:
        broker.create_topic("small", 1)
        values = [bytes([i % 251]) * 4000 for i in range(500)]  # 2 MB through 16 KB buffers
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
        for v in values:
            producer.produce("small", v, partition=0)
        assert producer.flush(30) == 0
        accepted = _accepted_buffers(broker)
        assert accepted and all(sizes == (2 * SMALL, 2 * SMALL) for sizes in accepted), accepted
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": broker.bootstrap_servers, "group.id": "small", "enable.auto.commit": False}
        )
        consumer.assign([confluent_kafka.TopicPartition("small", 0, 0)])
        got: list[bytes] = []
        for _ in range(300):
            if len(got) >= len(values):
                break
            got += [m.value() for m in consumer.consume(500, 0.2) if m.error() is None]
        consumer.close()
        assert got == values


@linux_only
def test_a_follower_fetches_over_a_connection_with_replica_socket_receive_buffer_bytes():
    with ReplicaSet(2, overrides={"replica.socket.receive.buffer.bytes": SMALL}) as rs:
        rs.create_topic("t", {0: [1, 2]})
        rs.leader_and_isr([partition_state("t", 0, 1, 1, [1, 2], [1, 2])])
        values = [bytes([i % 251]) * 4000 for i in range(300)]
        assert not [e for e, _ in _produce(rs.bootstrap(1), "t", values) if e]
        wait_for(lambda: rs.partition(2, "t").leo == len(values), what="the follower caught up")
        assert rs.batches(2, "t") == rs.batches(1, "t")
        received = rs.brokers[2].call(
            lambda b: [
                _buffers(f._conn._transport.get_extra_info("socket"))[1]
                for f in b.replica_manager.fetchers.fetchers.values()
                if f._conn is not None
            ]
        )
        assert received == [2 * SMALL]
