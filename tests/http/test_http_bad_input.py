"""Hostile and broken HTTP clients: garbage, oversized requests, path traversal, a reader
that never reads, and 10,000 idle connections. Each affects only itself: the Kafka side
keeps serving, and so does the HTTP side for everyone else."""

from __future__ import annotations

import resource
import socket
from urllib.parse import urlsplit

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from http_helpers import create_topic, get_json, request, scrape, value, wait_serving, wait_until

from odradek.testing.process import BrokerProcess


def address(broker) -> tuple[str, int]:
    parts = urlsplit(broker.http_url)
    return parts.hostname, parts.port


def raw_exchange(broker, data: bytes, timeout: float = 10.0) -> bytes:
    """Send ``data`` on a fresh connection and read until the server closes it."""
    with socket.create_connection(address(broker), timeout=timeout) as sock:
        sock.sendall(data)
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


def kafka_round_trip(broker, topic: str, n: int = 20) -> None:
    """Produce ``n`` records and read them back: the Kafka side serves."""
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, value=b"alive-%d" % i, partition=0)
    assert p.flush(20) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"rt-{topic}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        wait_until(lambda: got.extend(c.consume(100, timeout=0.5)) or len(got) >= n, 30, message=f"{n} records back")
    finally:
        c.close()
    assert [m.value() for m in got[-n:]] == [b"alive-%d" % i for i in range(n)]


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\x01\x02\x03\xff\xfe garbage \r\n\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64,  # a TLS ClientHello
    ],
)
def test_garbage_gets_400_and_a_closed_connection(http_broker, garbage):
    answer = raw_exchange(http_broker, garbage)
    assert answer.startswith(b"HTTP/1.") and b" 400 " in answer.split(b"\r\n")[0]
    assert get_json(http_broker.http_url, "/healthz")["status"] == "ok"


def test_oversized_requests_are_refused(http_broker, topic_name):
    create_topic(http_broker, topic_name)
    long_line = b"GET /v1/topics?" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    status_line = raw_exchange(http_broker, long_line).split(b"\r\n")[0]
    assert any(code in status_line for code in (b" 400 ", b" 414 ", b" 431 ")), status_line
    huge_header = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 100_000 + b"\r\n\r\n"
    status_line = raw_exchange(http_broker, huge_header).split(b"\r\n")[0]
    assert any(code in status_line for code in (b" 400 ", b" 431 ")), status_line
    many_headers = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(10_000)) + b"\r\n"
    status_line = raw_exchange(http_broker, many_headers).split(b"\r\n")[0]
    assert any(code in status_line for code in (b" 400 ", b" 431 ")), status_line

    big_body = b'{"name": "' + b"n" * 2_000_000 + b'"}'
    status, _, body = request(
        http_broker.http_url, "POST", "/v1/topics", body=big_body, headers={"Content-Type": "application/json"}
    )
    assert status == 413 and b"larger than" in body
    kafka_round_trip(http_broker, topic_name)


@pytest.mark.parametrize(
    "path",
    [
        "/static/../../../../etc/passwd",
        "/static/..%2f..%2f..%2f..%2fetc%2fpasswd",
        "/static/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/static/%2e%2e/app.py",
        "/static/vendor/../../app.py",
        "/static/vendor/uplot/..%5c..%5c..%5capp.py",
        "/static//etc/passwd",
        "/static/%252e%252e/app.py",
        "/static/console.js%00.png",
        "/static/",
        "/../../etc/passwd",
        "/static/" + "../" * 50 + "etc/passwd",
    ],
)
def test_path_traversal_in_asset_urls_finds_nothing(http_broker, path):
    status, _, body = request(http_broker.http_url, "GET", path)
    assert status in (400, 404), (path, status)
    assert b"root:" not in body and b"import " not in body


def test_the_shipped_assets_are_served(http_broker):
    for path, kind in [
        ("/", "text/html"),
        ("/static/console.js", "javascript"),
        ("/static/console.css", "text/css"),
        ("/static/vendor/uplot/uPlot.iife.min.js", "javascript"),
    ]:
        status, headers, body = request(http_broker.http_url, "GET", path)
        assert status == 200 and kind in headers["Content-Type"] and body, path
        assert headers["X-Content-Type-Options"] == "nosniff"


def test_a_client_that_never_reads_holds_only_its_own_connection(http_broker, topic_name):
    create_topic(http_broker, topic_name)
    host, port = address(http_broker)
    stuck = socket.create_connection((host, port))
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        # Hundreds of pipelined scrapes, never read: the broker's side of this one socket fills.
        stuck.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 300)
        kafka_round_trip(http_broker, topic_name)
        assert get_json(http_broker.http_url, "/v1/cluster")["controller_id"] == 0
    finally:
        stuck.close()


def test_ten_thousand_idle_http_connections_while_kafka_serves(tmp_path):
    wanted = 10_000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = wanted + 2_000
    if hard != resource.RLIM_INFINITY and hard < need:
        pytest.fail(f"this test needs {need} open files (ulimit -Hn is {hard}); raise the hard limit")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, need) if hard == resource.RLIM_INFINITY else hard, hard))
    broker = BrokerProcess(tmp_path / "data").start()  # inherits the raised limit
    idle: list[socket.socket] = []
    try:
        wait_serving(broker.http_url)
        create_topic(broker, "alive")
        host, port = address(broker)

        def accepted() -> float:
            samples = scrape(broker.http_url)
            return value(samples, "odradek_http_connections") + value(samples, "odradek_http_connections_evicted_total")

        # In steps that the listen backlog holds, so that no SYN is dropped and retried a second later.
        for _ in range(wanted // 1000):
            idle.extend(socket.create_connection((host, port), timeout=30) for _ in range(1000))
            wait_until(lambda: accepted() >= len(idle), 30, message=f"{len(idle)} connections accepted")
        kafka_round_trip(broker, "alive")
        # A newcomer still gets an answer: the oldest idle connections made room.
        assert get_json(broker.http_url, "/healthz")["status"] == "ok"
        samples = scrape(broker.http_url)
        cap = 1000  # http.max.connections' default
        assert value(samples, "odradek_http_connections") <= cap
        assert value(samples, "odradek_http_connections_evicted_total") >= wanted - cap
        log = broker.log_text()
        assert "HTTP connections at http.max.connections (1000): closing the oldest" in log
    finally:
        for sock in idle:
            sock.close()
        broker.stop()
        broker.close()
    assert "Traceback" not in broker.log_text()


def test_idle_connections_that_never_speak_are_closed(monkeypatch):
    """The first-request deadline frees a connection that only connected (older aiohttp
    releases kept those forever); checked on a broker in this process with a short deadline."""
    import odradek.http.http_server as server_module
    from odradek.testing import EmbeddedBroker

    monkeypatch.setattr(server_module, "FIRST_REQUEST_TIMEOUT_S", 0.5)
    with EmbeddedBroker() as broker:
        wait_serving(broker.http_url)
        parts = urlsplit(broker.http_url)
        quiet = socket.create_connection((parts.hostname, parts.port), timeout=10)
        try:
            assert quiet.recv(1) == b""  # closed by the server (a recv timeout would raise)
        except ConnectionResetError:
            pass  # closed by the server, with a reset
        finally:
            quiet.close()
