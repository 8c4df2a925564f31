"""Kafka Connect's REST API over aiohttp: it only translates HTTP to herder calls and back.

Paths, query parameters, bodies and status codes are Kafka's (``ConnectorsResource``,
``ConnectorPluginsResource``, ``LoggingResource``, ``RootResource``); every error is
``{"error_code": <status>, "message": ...}``. Basic authentication (``rest.basic.auth.users``)
guards every path when configured. Runs on the worker's event loop.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

from aiohttp import web

from odradek.connect.api import odradek_version
from odradek.connect.herder import TARGET_STATES, HerderError, StandaloneHerder
from odradek.connect.worker import STOPPED
from odradek.connect.worker_tasks import PAUSED

log = logging.getLogger("odradek.connect")


def error(status: int, message: str) -> web.Response:
    return web.json_response({"error_code": status, "message": message}, status=status)


async def _json_body(request: web.Request) -> Any:
    text = await request.text()
    try:
        return json.loads(text) if text.strip() else None
    except ValueError as exc:
        raise HerderError(400, f"Cannot deserialize the request body as JSON: {exc}") from None


def _flag(request: web.Request, name: str, default: bool = False) -> bool:
    value = request.query.get(name)
    return default if value is None else value.strip().lower() == "true"


def _task_id(request: web.Request) -> int:
    try:
        return int(request.match_info["task"])
    except ValueError:
        raise HerderError(404, f"Task id {request.match_info['task']!r} is not a number") from None


class ConnectRestApi:
    def __init__(self, herder: StandaloneHerder, cluster_id: str | None, metrics=None,
                 basic_users: dict[str, str] | None = None):
        self.herder = herder
        self.cluster_id = cluster_id
        self.metrics = metrics
        self.basic_users = basic_users or {}

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._errors])
        r = app.router
        r.add_get("/", self.root)
        r.add_get("/connectors", self.list_connectors)
        r.add_post("/connectors", self.create)
        r.add_get("/connectors/{name}", self.get_info)
        r.add_delete("/connectors/{name}", self.delete)
        r.add_get("/connectors/{name}/config", self.get_config)
        r.add_put("/connectors/{name}/config", self.put_config)
        r.add_get("/connectors/{name}/status", self.status)
        r.add_get("/connectors/{name}/tasks", self.tasks)
        r.add_get("/connectors/{name}/tasks/{task}/status", self.task_status)
        r.add_post("/connectors/{name}/restart", self.restart)
        r.add_post("/connectors/{name}/tasks/{task}/restart", self.restart_task)
        r.add_put("/connectors/{name}/pause", self.target(PAUSED))
        r.add_put("/connectors/{name}/resume", self.target("RUNNING"))
        r.add_put("/connectors/{name}/stop", self.target(STOPPED))
        r.add_get("/connectors/{name}/offsets", self.get_offsets)
        r.add_patch("/connectors/{name}/offsets", self.patch_offsets)
        r.add_delete("/connectors/{name}/offsets", self.delete_offsets)
        r.add_get("/connectors/{name}/topics", self.topics)
        r.add_put("/connectors/{name}/topics/reset", self.reset_topics)
        r.add_get("/connector-plugins", self.plugins)
        r.add_put("/connector-plugins/{plugin}/config/validate", self.validate)
        r.add_get("/connector-plugins/{plugin}/config", self.plugin_config)
        r.add_get("/admin/loggers", self.loggers)
        r.add_get("/admin/loggers/{logger}", self.logger)
        r.add_put("/admin/loggers/{logger}", self.set_logger)
        r.add_get("/metrics", self.get_metrics)
        return app

    @web.middleware
    async def _errors(self, request: web.Request, handler):
        if self.basic_users and not self._authorised(request):
            response = error(401, "User cannot access the resource: missing or wrong basic credentials")
            response.headers["WWW-Authenticate"] = 'Basic realm="connect"'
            return response
        try:
            return await handler(request)
        except HerderError as exc:
            return error(exc.status, exc.message)
        except web.HTTPException as exc:
            if exc.status >= 400:
                return error(exc.status, f"HTTP {exc.status} {exc.reason}")
            raise
        except Exception as exc:
            log.exception("REST %s %s failed", request.method, request.path)
            return error(500, f"{type(exc).__name__}: {exc}")

    def _authorised(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        if not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:]).decode().partition(":")
        except ValueError:
            return False
        return self.basic_users.get(user) == password

    async def root(self, request):
        return web.json_response({"version": odradek_version(), "commit": "odradek", "kafka_cluster_id": self.cluster_id})

    async def list_connectors(self, request):
        names = self.herder.connectors()
        expand = request.query.getall("expand", [])
        if not expand:
            return web.json_response(names)
        out: dict[str, dict] = {}
        for name in names:
            entry = out.setdefault(name, {})
            if "status" in expand:
                entry["status"] = self.herder.status(name)
            if "info" in expand:
                entry["info"] = self.herder.info(name)
        return web.json_response(out)

    async def create(self, request):
        body = await _json_body(request)
        if not isinstance(body, dict) or not isinstance(body.get("config", {}), dict):
            raise HerderError(400, 'expected {"name": ..., "config": {...}}')
        config = dict(body.get("config") or {})
        name = body.get("name") or config.get("name")
        if config.get("name") and body.get("name") and config["name"] != body["name"]:
            raise HerderError(400, "Connector name configuration (" + config["name"] + ") doesn't match connector "
                                   "name in the URL (" + body["name"] + ")")
        initial = str(body.get("initial_state") or "RUNNING").upper()
        if initial not in TARGET_STATES:
            raise HerderError(400, f"Invalid initial state {body.get('initial_state')!r}: one of RUNNING, PAUSED, STOPPED")
        _, info = await self.herder.put_config(str(name or ""), config, allow_replace=False, initial_state=initial)
        return web.json_response(info, status=201)

    async def get_info(self, request):
        return web.json_response(self.herder.info(request.match_info["name"]))

    async def delete(self, request):
        await self.herder.delete(request.match_info["name"])
        return web.Response(status=204)

    async def get_config(self, request):
        return web.json_response(self.herder.config(request.match_info["name"]))

    async def put_config(self, request):
        name = request.match_info["name"]
        body = await _json_body(request)
        if not isinstance(body, dict):
            raise HerderError(400, "expected a JSON object of config keys")
        if body.get("name") not in (None, name):
            raise HerderError(400, f"Connector name configuration ({body['name']}) doesn't match connector name "
                                   f"in the URL ({name})")
        created, info = await self.herder.put_config(name, body, allow_replace=True)
        return web.json_response(info, status=201 if created else 200)

    async def status(self, request):
        return web.json_response(self.herder.status(request.match_info["name"]))

    async def tasks(self, request):
        return web.json_response(self.herder.task_configs(request.match_info["name"]))

    async def task_status(self, request):
        return web.json_response(self.herder.task_status(request.match_info["name"], _task_id(request)))

    async def restart(self, request):
        include, only_failed = _flag(request, "includeTasks"), _flag(request, "onlyFailed")
        status = await self.herder.restart(request.match_info["name"], include, only_failed)
        if not include and not only_failed:
            return web.Response(status=204)
        return web.json_response(status, status=202)

    async def restart_task(self, request):
        await self.herder.restart_task(request.match_info["name"], _task_id(request))
        return web.Response(status=204)

    def target(self, state: str):
        async def handler(request):
            await self.herder.set_target(request.match_info["name"], state)
            return web.Response(status=204 if state == STOPPED else 202)

        return handler

    async def get_offsets(self, request):
        return web.json_response(await self.herder.offsets(request.match_info["name"]))

    async def patch_offsets(self, request):
        body = await _json_body(request)
        if not isinstance(body, dict) or not isinstance(body.get("offsets"), list):
            raise HerderError(400, 'expected {"offsets": [{"partition": {...}, "offset": {...}}, ...]}')
        message = await self.herder.alter_offsets(request.match_info["name"], body["offsets"])
        return web.json_response({"message": message})

    async def delete_offsets(self, request):
        message = await self.herder.alter_offsets(request.match_info["name"], None)
        return web.json_response({"message": message})

    async def topics(self, request):
        return web.json_response(self.herder.topics(request.match_info["name"]))

    async def reset_topics(self, request):
        self.herder.reset_topics(request.match_info["name"])
        return web.Response(status=200)

    async def plugins(self, request):
        out = [p.info() for p in self.herder.worker.plugins.connectors()]
        if not _flag(request, "connectorsOnly", True):
            out += extra_plugins()
        return web.json_response(out)

    async def validate(self, request):
        plugin = request.match_info["plugin"]
        body = await _json_body(request)
        if not isinstance(body, dict):
            raise HerderError(400, "expected a JSON object of config keys")
        given = body.get("connector.class")
        if given and not (given == plugin or str(given).endswith("." + plugin) or plugin.endswith("." + str(given))):
            raise HerderError(400, f"Included connector type {given} does not match request type {plugin}")
        return web.json_response(self.herder.validate({**body, "connector.class": given or plugin}))

    async def plugin_config(self, request):
        plugin = request.match_info["plugin"]
        try:
            found = self.herder.worker.plugins.find(plugin)
        except Exception:
            raise HerderError(404, f"Unknown plugin {plugin}.") from None
        return web.json_response([k.definition() for k in found.cls().config_def().keys.values()])

    async def loggers(self, request):
        names = sorted(n for n in logging.root.manager.loggerDict if logging.getLogger(n).level)
        out = {"root": {"level": logging.getLevelName(logging.root.level)}}
        out.update({n: {"level": logging.getLevelName(logging.getLogger(n).level)} for n in names})
        return web.json_response(out)

    async def logger(self, request):
        name = request.match_info["logger"]
        logger = logging.root if name == "root" else logging.getLogger(name)
        return web.json_response({"level": logging.getLevelName(logger.getEffectiveLevel())})

    async def set_logger(self, request):
        name = request.match_info["logger"]
        body = await _json_body(request)
        level = str((body or {}).get("level", "")).upper()
        if level not in ("TRACE", "DEBUG", "INFO", "WARN", "WARNING", "ERROR", "FATAL", "OFF"):
            raise HerderError(400, f"Invalid log level '{(body or {}).get('level')}'.")
        py_level = {"TRACE": "DEBUG", "WARN": "WARNING", "FATAL": "CRITICAL", "OFF": "CRITICAL"}.get(level, level)
        logger = logging.root if name == "root" else logging.getLogger(name)
        logger.setLevel(py_level)
        changed = [name] + sorted(n for n in logging.root.manager.loggerDict if n.startswith(name + "."))
        return web.json_response(changed)

    async def get_metrics(self, request):
        text = self.metrics.render() if self.metrics is not None else ""
        return web.Response(text=text, content_type="text/plain", charset="utf-8")


def extra_plugins() -> list[dict[str, str]]:
    from odradek.connect.converters import CONVERTERS, HEADER_CONVERTERS
    from odradek.connect.transforms import PREDICATES, TRANSFORMATIONS

    version = odradek_version()
    out = [{"class": c, "type": "converter", "version": version} for c in sorted(CONVERTERS)]
    out += [{"class": c, "type": "header_converter", "version": version} for c in sorted(HEADER_CONVERTERS)]
    out += [{"class": c, "type": "transformation", "version": version} for c in sorted(TRANSFORMATIONS)]
    out += [{"class": c, "type": "predicate", "version": version} for c in sorted(PREDICATES)]
    return out
