"""Prometheus metrics of one registry instance, served at ``/metrics`` on its listeners.

Requests by endpoint (the route's pattern, e.g. ``/subjects/{subject}/versions``), method and
status, and their latency; the schema versions and distinct schemas held; whether this
instance leads. The names of Confluent's JMX metrics (``kafka_schema_registry_*``, as the
JMX exporter renders them) where Confluent has one. Each instance has its own collector
registry, so a registry beside a broker does not mix into the broker's ``/metrics``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .registry_state import RegistryState


class RegistryMetrics:
    def __init__(self, state: Callable[[], RegistryState], is_leader: Callable[[], bool]):
        self.collectors = CollectorRegistry()
        self.requests = Counter(
            "odradek_schema_registry_requests",
            "REST requests answered, by endpoint, method and HTTP status.",
            ["endpoint", "method", "status"],
            registry=self.collectors,
        )
        self.latency = Histogram(
            "odradek_schema_registry_request_seconds",
            "Time to answer a REST request, by endpoint.",
            ["endpoint"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=self.collectors,
        )
        registered = Gauge(
            "kafka_schema_registry_registered_count",
            "Schema versions held (not deleted).",
            registry=self.collectors,
        )
        registered.set_function(lambda: sum(1 for vs in state().versions.values() for sv in vs.values() if not sv.deleted))
        schemas = Gauge("odradek_schema_registry_schemas", "Distinct schemas (ids) held.", registry=self.collectors)
        schemas.set_function(lambda: len(state().by_id))
        leader = Gauge(
            "kafka_schema_registry_master_slave_role",
            "1 while this instance is the leader (the one that writes), else 0.",
            registry=self.collectors,
        )
        leader.set_function(lambda: 1 if is_leader() else 0)
        # The labelled children, looked up once: labels() costs more than the request it counts.
        self._counted: dict[tuple[str, str, str], Counter] = {}
        self._timed: dict[str, Histogram] = {}

    @web.middleware
    async def middleware(self, request: web.Request, handler):
        started = time.perf_counter()
        route = request.match_info.route.resource
        endpoint = route.canonical if route is not None else "unmatched"
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            if endpoint != "/metrics":
                self._observe(endpoint, request.method, status, time.perf_counter() - started)

    def _observe(self, endpoint: str, method: str, status: int, seconds: float) -> None:
        counted = self._counted.get((endpoint, method, str(status)))
        if counted is None:
            counted = self._counted[(endpoint, method, str(status))] = self.requests.labels(endpoint, method, str(status))
        counted.inc()
        timed = self._timed.get(endpoint)
        if timed is None:
            timed = self._timed[endpoint] = self.latency.labels(endpoint)
        timed.observe(seconds)

    async def handle(self, request: web.Request) -> web.Response:
        body = generate_latest(self.collectors)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
