"""Distributed mode (``connect-distributed.sh``): a worker of the Connect cluster of its ``group.id``.

``DistributedRuntime`` is the standalone runtime with a ``DistributedHerder`` (state in the
internal topics, work from the group) and one more REST layer: a write that reaches a follower
is forwarded to the leader's advertised URL (``?forward=false`` marks a forwarded request, which
is never forwarded again); a task restart goes to the worker that runs the task; while the
group rebalances, writes answer 409 as Kafka's do.
"""

from __future__ import annotations

import re

import aiohttp
from aiohttp import web

from odradek.connect.distributed_herder import DistributedHerder
from odradek.connect.kafka_stores import KafkaOffsetStore
from odradek.connect.plugins import PluginRegistry
from odradek.connect.rest_server import ConnectRestApi, error
from odradek.connect.standalone import StandaloneRuntime
from odradek.connect.worker import Worker

STALE = ("Cannot complete request momentarily due to stale configuration "
         "(typically caused by a concurrent config change)")
WRITES = {"POST", "PUT", "PATCH", "DELETE"}
TASK_RESTART = re.compile(r"^/connectors/([^/]+)/tasks/(\d+)/restart$")
FORWARD_TIMEOUT_S = 60


class DistributedRuntime(StandaloneRuntime):
    mode = "distributed"
    herder: DistributedHerder | None

    def make_herder(self) -> DistributedHerder:
        eos = self.config["exactly.once.source.support"] == "enabled"
        store = KafkaOffsetStore(self.config["group.id"] if eos else None)
        worker = Worker(self.config, PluginRegistry(self.config["plugin.path"]), store, "")
        return DistributedHerder(worker, store)

    def web_app(self, api: ConnectRestApi) -> web.Application:
        app = api.app()
        app.middlewares.append(self._forward)
        return app

    async def started(self) -> None:
        assert self.herder is not None
        await self.herder.start(self.advertised_url)

    @property
    def advertised_url(self) -> str:
        scheme, host, port = self.bound[0]
        scheme = self.config["rest.advertised.listener"] or scheme
        host = self.config["rest.advertised.host.name"] or ("127.0.0.1" if host == "0.0.0.0" else host)
        return f"{scheme}://{host}:{self.config['rest.advertised.port'] or port}/"

    @web.middleware
    async def _forward(self, request: web.Request, handler):
        herder = self.herder
        if request.method not in WRITES or not request.path.startswith("/connectors") or herder is None:
            return await handler(request)
        forwarded = request.query.get("forward") == "false"
        task = TASK_RESTART.match(request.path)
        if task is not None and not forwarded:
            owner = herder.task_owner(task.group(1), int(task.group(2)))
            if owner and owner != herder.worker.worker_id:
                scheme = self.advertised_url.split(":", 1)[0]
                return await _proxy(request, f"{scheme}://{owner}/")
            return await handler(request)
        if herder.group.rebalancing or not herder.leader_url:
            return error(409, STALE)
        if herder.group.is_leader or task is not None:
            return await handler(request)
        if forwarded:
            return error(409, STALE)
        return await _proxy(request, herder.leader_url)


async def _proxy(request: web.Request, base_url: str) -> web.Response:
    query = dict(request.query)
    query["forward"] = "false"
    headers = {k: v for k, v in request.headers.items() if k.lower() in ("content-type", "authorization", "accept")}
    body = await request.read()
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S)) as session:
            async with session.request(request.method, base_url.rstrip("/") + request.path, params=query,
                                       data=body or None, headers=headers) as answer:
                payload = await answer.read()
                return web.Response(status=answer.status, body=payload,
                                    content_type=answer.content_type if payload else None)
    except aiohttp.ClientError as exc:
        return error(409, f"{STALE}: the leader at {base_url} cannot be reached ({exc})")
