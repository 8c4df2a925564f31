"""Helpers for the HTTP-side tests: plain HTTP requests, Prometheus scrapes, waiting.

Requests go through ``http.client`` (the standard library), the scrape is parsed with
``prometheus_client``'s own text parser, so the broker's output is read by code it did
not write.
"""

from __future__ import annotations

import http.client
import json
import time
from pathlib import Path
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"  # gitignored; screenshots land here


def wait_until(predicate, timeout: float = 15.0, interval: float = 0.05, message: str = "condition"):
    """Poll ``predicate`` until it returns something truthy; return that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def request(base: str, method: str, path: str, body=None, headers=None, timeout: float = 10.0):
    """(status, headers, body bytes) of one request on a fresh connection."""
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        data = body
        hdrs = dict(headers or {})
        if isinstance(body, dict | list):
            data = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        conn.request(method, path, body=data, headers=hdrs)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def get_json(base: str, path: str, expect: int = 200, timeout: float = 10.0):
    status, _, body = request(base, "GET", path, timeout=timeout)
    assert status == expect, f"GET {path}: {status} {body[:500]!r}"
    return json.loads(body)


def post_json(base: str, path: str, body: dict, expect: int = 200, headers=None):
    status, _, raw = request(base, "POST", path, body=body, headers=headers)
    assert status == expect, f"POST {path}: {status} {raw[:500]!r}"
    return json.loads(raw)


def wait_serving(base: str, timeout: float = 30.0) -> None:
    def up():
        try:
            return request(base, "GET", "/healthz", timeout=2)[0] == 200
        except OSError:
            return False

    wait_until(up, timeout, message=f"{base}/healthz to answer")


def scrape(base: str) -> dict:
    """Every sample of /metrics: {(name, ((label, value), ...)): value}."""
    status, headers, body = request(base, "GET", "/metrics")
    assert status == 200, body[:300]
    assert headers["Content-Type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples: dict, name: str, **labels) -> float | None:
    return samples.get((name, tuple(sorted((k, str(v)) for k, v in labels.items()))))


def series(samples: dict, name: str) -> dict:
    """{labels dict as a sorted tuple: value} of every sample named ``name``."""
    return {labels: v for (n, labels), v in samples.items() if n == name}


def create_topic(broker, name: str, partitions: int = 1, config: dict | None = None) -> None:
    """Create a topic with confluent-kafka's AdminClient and wait until it exists."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})  # alive until the result
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=10)
    futures[name].result(timeout=15)
