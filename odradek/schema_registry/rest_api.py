"""The REST API v1 of Confluent's registry, in aiohttp: translate HTTP to ``Registry`` calls.

Bodies are JSON in ``application/vnd.schemaregistry.v1+json`` (also accepted:
``application/vnd.schemaregistry+json``, ``application/json``, ``application/octet-stream``);
every error is ``{"error_code": ..., "message": ...}`` with Confluent's codes. Writes go to
``write_target`` (the registry itself on the leader; ``forward`` elsewhere).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from . import registry_errors as err
from .registry import Registry
from .registry_metrics import RegistryMetrics
from .registry_security import RegistrySecurity

log = logging.getLogger("odradek.schema_registry")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPTED_BODIES = {
    "application/vnd.schemaregistry.v1+json",
    "application/vnd.schemaregistry+json",
    "application/json",
    "application/octet-stream",
}
MAX_BODY_BYTES = 16 * 1024 * 1024

REGISTRY = web.AppKey("registry", Registry)
# A write request (method, path with query, body) the leader must answer, or None: answer here.
Forward = Callable[[web.Request, bytes], Awaitable[web.Response | None]]
FORWARD = web.AppKey("forward", object)
READY = web.AppKey("ready", asyncio.Event)


def reply(body, status: int = 200) -> web.Response:
    return web.Response(status=status, text=json.dumps(body), content_type=CONTENT_TYPE)


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").strip().lower() == "true"


def _int_path(request: web.Request, name: str) -> int:
    try:
        return int(request.match_info[name])
    except ValueError:
        raise err.RegistryError(404, 404, f"HTTP 404 Not Found: {name} must be an integer") from None


async def _body(request: web.Request):
    ctype = request.content_type
    if ctype not in ACCEPTED_BODIES:
        raise err.RegistryError(
            415, 415, f"HTTP 415 Unsupported Media Type: send the body as {CONTENT_TYPE}, not {ctype}"
        )
    raw = await request.read()
    try:
        return json.loads(raw or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise err.RegistryError(400, 400, f"HTTP 400 Bad Request: the body is not JSON: {exc}") from None
    except RecursionError:
        raise err.RegistryError(400, 400, "HTTP 400 Bad Request: the body's JSON is nested too deeply") from None


@web.middleware
async def errors_as_json(request: web.Request, handler):
    try:
        ready = request.app.get(READY)
        if ready is not None and not ready.is_set() and request.path != "/metrics":
            raise err.store_error("the registry has not read its schemas topic to the end yet; retry shortly")
        return await handler(request)
    except err.RegistryError as exc:
        return reply(exc.body(), exc.status)
    except web.HTTPRequestEntityTooLarge:
        return reply(
            {"error_code": 413, "message": f"HTTP 413 Payload Too Large: bodies are limited to {MAX_BODY_BYTES} bytes"},
            413,
        )
    except web.HTTPException as exc:
        return reply({"error_code": exc.status, "message": f"HTTP {exc.status} {exc.reason}"}, exc.status)
    except Exception as exc:  # the request fails, the registry keeps serving
        log.exception("%s %s failed", request.method, request.path)
        return reply({"error_code": 500, "message": f"Internal Server Error: {exc}"}, 500)


async def _forwarded(request: web.Request) -> web.Response | None:
    """The leader's answer to this write when this instance is not the leader, else None."""
    forward = request.app.get(FORWARD)
    if forward is None:
        return None
    return await forward(request, await request.read())  # type: ignore[operator]


def routes() -> web.RouteTableDef:
    r = web.RouteTableDef()

    def registry(request: web.Request) -> Registry:
        return request.app[REGISTRY]

    @r.get("/")
    async def root(request):
        return reply({})

    @r.get("/schemas/types")
    async def types(request):
        return reply(registry(request).types())

    @r.get("/schemas/ids/{id}")
    async def schema_by_id(request):
        body = registry(request).schema_by_id_body(_int_path(request, "id"), request.query.get("format"))
        return web.Response(body=body, content_type=CONTENT_TYPE)

    @r.get("/schemas/ids/{id}/schema")
    async def raw_schema_by_id(request):
        return reply(json.loads(registry(request).schema_by_id(_int_path(request, "id"))["schema"]))

    @r.get("/schemas/ids/{id}/versions")
    async def id_versions(request):
        return reply(registry(request).id_versions(_int_path(request, "id"), _flag(request, "deleted")))

    @r.get("/schemas/ids/{id}/subjects")
    async def id_subjects(request):
        return reply(registry(request).id_subjects(_int_path(request, "id"), _flag(request, "deleted")))

    @r.get("/subjects")
    async def subjects(request):
        prefix = request.query.get("subjectPrefix", "")
        return reply(registry(request).subjects(_flag(request, "deleted"), prefix))

    @r.get("/subjects/{subject}/versions")
    async def versions(request):
        return reply(registry(request).versions(request.match_info["subject"], _flag(request, "deleted")))

    @r.post("/subjects/{subject}/versions")
    async def register(request):
        forwarded = await _forwarded(request)
        if forwarded is not None:
            return forwarded
        body = await _body(request)
        return reply(await registry(request).register(request.match_info["subject"], body, _flag(request, "normalize")))

    @r.get("/subjects/{subject}/versions/{version}")
    async def version(request):
        from .registry import version_json

        sv = registry(request).version(
            request.match_info["subject"], request.match_info["version"], _flag(request, "deleted")
        )
        shown = version_json(sv)
        shown["schema"] = registry(request).schema_text(sv, request.query.get("format"))
        return reply(shown)

    @r.get("/subjects/{subject}/versions/{version}/schema")
    async def raw_version(request):
        sv = registry(request).version(
            request.match_info["subject"], request.match_info["version"], _flag(request, "deleted")
        )
        return reply(json.loads(sv.schema))

    @r.get("/subjects/{subject}/versions/{version}/referencedby")
    async def referenced_by(request):
        return reply(registry(request).referenced_by(request.match_info["subject"], request.match_info["version"]))

    @r.delete("/subjects/{subject}/versions/{version}")
    async def delete_version(request):
        forwarded = await _forwarded(request)
        if forwarded is not None:
            return forwarded
        return reply(
            await registry(request).delete_version(
                request.match_info["subject"], request.match_info["version"], _flag(request, "permanent")
            )
        )

    @r.post("/subjects/{subject}")
    async def lookup(request):
        body = await _body(request)
        return reply(
            registry(request).lookup(
                request.match_info["subject"], body, _flag(request, "normalize"), _flag(request, "deleted")
            )
        )

    @r.delete("/subjects/{subject}")
    async def delete_subject(request):
        forwarded = await _forwarded(request)
        if forwarded is not None:
            return forwarded
        return reply(await registry(request).delete_subject(request.match_info["subject"], _flag(request, "permanent")))

    @r.post("/compatibility/subjects/{subject}/versions/{version}")
    async def compatibility_of_version(request):
        body = await _body(request)
        return reply(
            registry(request).check_compatibility(
                request.match_info["subject"], request.match_info["version"], body, _flag(request, "verbose")
            )
        )

    @r.post("/compatibility/subjects/{subject}/versions")
    async def compatibility_of_all(request):
        body = await _body(request)
        return reply(
            registry(request).check_compatibility(request.match_info["subject"], None, body, _flag(request, "verbose"))
        )

    for path, subject_of in (("/config", lambda req: None), ("/config/{subject}", lambda req: req.match_info["subject"])):

        async def get_config(request, subject_of=subject_of):
            return reply(registry(request).get_config(subject_of(request), _flag(request, "defaultToGlobal")))

        async def put_config(request, subject_of=subject_of):
            forwarded = await _forwarded(request)
            if forwarded is not None:
                return forwarded
            return reply(await registry(request).set_config(subject_of(request), await _body(request)))

        async def delete_config(request, subject_of=subject_of):
            forwarded = await _forwarded(request)
            if forwarded is not None:
                return forwarded
            return reply(await registry(request).delete_config(subject_of(request)))

        r.get(path)(get_config)
        r.put(path)(put_config)
        r.delete(path)(delete_config)

    for path, subject_of in (("/mode", lambda req: None), ("/mode/{subject}", lambda req: req.match_info["subject"])):

        async def get_mode(request, subject_of=subject_of):
            return reply(registry(request).get_mode(subject_of(request), _flag(request, "defaultToGlobal")))

        async def put_mode(request, subject_of=subject_of):
            forwarded = await _forwarded(request)
            if forwarded is not None:
                return forwarded
            return reply(await registry(request).set_mode(subject_of(request), await _body(request), _flag(request, "force")))

        r.get(path)(get_mode)
        r.put(path)(put_mode)

    @r.delete("/mode/{subject}")
    async def delete_mode(request):
        forwarded = await _forwarded(request)
        if forwarded is not None:
            return forwarded
        return reply(await registry(request).delete_mode(request.match_info["subject"]))

    return r


def make_app(
    registry: Registry,
    forward: Forward | None = None,
    ready: asyncio.Event | None = None,
    metrics: RegistryMetrics | None = None,
    security: RegistrySecurity | None = None,
) -> web.Application:
    middlewares = [] if metrics is None else [metrics.middleware]
    middlewares.append(errors_as_json)
    if security is not None:
        middlewares.append(security.middleware)
    app = web.Application(middlewares=middlewares, client_max_size=MAX_BODY_BYTES)
    if metrics is not None:
        app.router.add_get("/metrics", metrics.handle)
    app[REGISTRY] = registry
    if ready is not None:
        app[READY] = ready
    if forward is not None:
        app[FORWARD] = forward
    app.add_routes(routes())
    return app
