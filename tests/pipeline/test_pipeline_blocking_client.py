"""The pipeline's blocking connection (on the shared sans-IO core) against a real broker: versions
capped to what it was written for, pipelined requests answered in order, and failures as WireError."""

from __future__ import annotations

import socket
import threading

import pytest

from odradek.pipeline.blocking_client import Cluster, Connection, WireError
from odradek.protocol import api_keys, errors


def test_versions_are_negotiated_and_capped(broker):
    conn = Connection(broker.host, broker.port)
    try:
        assert set(conn.versions) == {
            api_keys.PRODUCE,
            api_keys.FETCH,
            api_keys.LIST_OFFSETS,
            api_keys.METADATA,
            api_keys.SASL_HANDSHAKE,  # for security.protocol=SASL_* (used only then)
            api_keys.SASL_AUTHENTICATE,
        }  # CreateTopics goes through the Python client's admin (to the controller)
        assert conn.versions[api_keys.METADATA] == 9 and conn.versions[api_keys.PRODUCE] == 9
        with pytest.raises(errors.UnsupportedVersionError):
            conn.version(api_keys.JOIN_GROUP)
    finally:
        conn.close()


def test_pipelined_requests_are_answered_in_order(broker, topic_name):
    with Cluster(broker.bootstrap_servers) as cluster:
        assert cluster.create_topic(topic_name, 2)
        conn = cluster.connection(cluster.leader(topic_name, 0))
        first = conn.send(api_keys.METADATA, {"topics": [{"name": topic_name}]})
        second = conn.send(api_keys.METADATA, {"topics": None})
        assert conn.in_flight == 2
        with pytest.raises(RuntimeError, match="in order"):
            conn.receive(second)
        assert [t.name for t in conn.receive(first).topics] == [topic_name]
        assert topic_name in {t.name for t in conn.receive(second).topics}
        assert conn.in_flight == 0 and not cluster.has_pending()


def test_a_broker_that_hangs_up_is_a_wire_error():
    listener = socket.create_server(("127.0.0.1", 0))

    def hang_up():
        sock, _ = listener.accept()
        sock.recv(1024)
        sock.close()

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    try:
        with pytest.raises(WireError, match="closed by the broker"):
            Connection("127.0.0.1", listener.getsockname()[1], timeout=5)
    finally:
        listener.close()
        thread.join(5)
