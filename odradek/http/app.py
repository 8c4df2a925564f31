"""The routes: metrics, health, the JSON API (``/v1``) and the console, over one view.

``make_app(view, metrics, authorizer)`` serves the same pages and API whether ``view``
reads a broker from inside (``LocalView``) or a cluster through the Kafka protocol
(``RemoteView``). API errors are JSON ``{"error": "..."}`` with a status that says whose
fault it was (400 bad input, 403 refused, 404 unknown, 409 not now, 413 too large, 500
ours). Actions (POST) must carry a JSON body, and a browser's ``Origin`` must be this
server, so that another web page cannot make a visitor's browser act on the cluster.
Assets are served from a table of the files shipped in ``static/``, looked up by exact
name, so no request path ever reaches the file system.
"""

from __future__ import annotations

import json
import logging
import mimetypes
from importlib import resources
from urllib.parse import urlsplit

from aiohttp import web

from odradek.http import connect_proxy, schemas_proxy, shapes
from odradek.http.authz import ANONYMOUS, ConsoleAuthorizer
from odradek.http.connect_proxy import ConnectLink
from odradek.http.schemas_proxy import SchemaRegistryLink
from odradek.http.shapes import ApiError
from odradek.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
_NOT_FOUND_CODES = {ErrorCode.unknown_topic_or_partition, ErrorCode.group_id_not_found}
_SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
_PAGE_POLICY = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'"
)


def load_assets() -> dict[str, tuple[bytes, str]]:
    """Every file under ``static/``, by its path relative to it: (bytes, content type)."""
    assets = {}
    root = resources.files("odradek.http") / "static"

    def walk(node, prefix: str) -> None:
        for child in node.iterdir():
            name = f"{prefix}{child.name}"
            if child.is_dir():
                walk(child, name + "/")
            elif not child.name.startswith("."):
                kind = mimetypes.guess_type(child.name)[0] or "application/octet-stream"
                if kind.startswith("text/") or kind in ("application/javascript", "text/javascript"):
                    kind += "; charset=utf-8"
                assets[name] = (child.read_bytes(), kind)

    walk(root, "")
    return assets


def make_app(
    view,
    metrics,
    authorizer: ConsoleAuthorizer | None = None,
    schemas: SchemaRegistryLink | None = None,
    *,
    connect: ConnectLink | None = None,
) -> web.Application:
    """``metrics`` is an async function returning the Prometheus text as bytes; ``schemas``
    is the registry the Schemas page reads (``/v1/schemas/...``); ``connect`` is where the
    Connectors page reads Kafka Connect clusters (``/v1/connect``)."""
    authorizer = authorizer or ConsoleAuthorizer()
    assets = load_assets()
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[_errors])
    routes = web.RouteTableDef()

    # -- operations ------------------------------------------------------------------------

    @routes.get("/metrics")
    async def get_metrics(request):
        from odradek.http.exporter import CONTENT_TYPE_LATEST

        body = await metrics()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    @routes.get("/healthz")
    async def healthz(request):
        return _json({"status": "ok", "source": view.source})

    @routes.get("/readyz")
    async def readyz(request):
        reasons = await view.readiness()
        if reasons:
            return _json({"status": "not ready", "reasons": reasons}, status=503)
        return _json({"status": "ready"})

    # -- the JSON API ----------------------------------------------------------------------

    @routes.get("/v1/cluster")
    async def cluster(request):
        return _json(await view.cluster())

    @routes.get("/v1/brokers")
    async def brokers(request):
        return _json(await view.brokers())

    @routes.get("/v1/brokers/{broker_id}/configs")
    async def broker_configs(request):
        broker_id = shapes.parse_int(request.match_info, "broker_id")
        return _json(await view.broker_configs(broker_id))

    @routes.get("/v1/topics")
    async def topics(request):
        return _json(await view.topics())

    @routes.post("/v1/topics")
    async def create_topic(request):
        body = await _body(request)
        name = body.get("name")
        if not isinstance(name, str) or not name:
            raise ApiError(400, "name: give the new topic's name")
        partitions = shapes.parse_int(body, "partitions", -1, low=-1, high=100_000)
        replication = shapes.parse_int(body, "replication_factor", -1, low=-1, high=1000)
        configs = body.get("configs") or {}
        if not isinstance(configs, dict) or not all(isinstance(v, str) for v in configs.values()):
            raise ApiError(400, 'configs: give an object of strings, e.g. {"retention.ms": "60000"}')
        _authorize(authorizer, "CREATE", "TOPIC", name)
        return _json(await view.create_topic(name, partitions, replication, configs), status=201)

    @routes.get("/v1/topics/{topic}")
    async def topic(request):
        return _json(await view.topic(request.match_info["topic"]))

    @routes.get("/v1/topics/{topic}/messages")
    async def messages(request):
        q = request.query
        partition = shapes.parse_int(q, "partition", 0, low=0)
        offset = shapes.parse_int(q, "offset", None, low=0)
        timestamp = shapes.parse_int(q, "timestamp", None, low=0)
        if offset is not None and timestamp is not None:
            raise ApiError(400, "give offset or timestamp, not both")
        limit = shapes.parse_int(q, "limit", 20, low=1, high=shapes.MAX_RECORDS)
        return _json(await view.messages(request.match_info["topic"], partition, offset, timestamp, limit))

    @routes.post("/v1/topics/{topic}/delete-records")
    async def delete_records(request):
        name = request.match_info["topic"]
        body = await _body(request)
        raw = body.get("partitions")
        if not isinstance(raw, dict) or not raw:
            raise ApiError(
                400, 'partitions: give {"<partition>": <offset>, ...}; records below each offset go'
            )
        offsets = {}
        for key, value in raw.items():
            index = shapes.parse_int({"partition": key}, "partition", low=0)
            offsets[index] = shapes.parse_int({"offset": value}, "offset", low=-1)
        _authorize(authorizer, "DELETE", "TOPIC", name)
        return _json(await view.delete_records(name, offsets))

    @routes.get("/v1/groups")
    async def groups(request):
        return _json(await view.groups())

    @routes.get("/v1/groups/{group}")
    async def group(request):
        return _json(await view.group(request.match_info["group"]))

    @routes.post("/v1/groups/{group}/reset-offsets")
    async def reset_offsets(request):
        group_id = request.match_info["group"]
        body = await _body(request)
        topic_name = body.get("topic")
        if not isinstance(topic_name, str) or not topic_name:
            raise ApiError(400, "topic: give the topic whose offsets to reset")
        to = body.get("to")
        if to not in ("earliest", "latest", "offset", "timestamp"):
            raise ApiError(400, f"to must be earliest, latest, offset or timestamp, got {to!r}")
        value = shapes.parse_int(body, "value", None, low=0)
        if to in ("offset", "timestamp") and value is None:
            raise ApiError(400, f"value: give the {to} to reset to")
        _authorize(authorizer, "READ", "GROUP", group_id)
        _authorize(authorizer, "READ", "TOPIC", topic_name)  # as Kafka's OffsetCommit asks
        return _json(await view.reset_offsets(group_id, topic_name, to, value))

    schemas_proxy.add_routes(routes, schemas)

    async def connector_action_guard(request) -> None:
        await _body(request)  # an action: JSON from the console's own origin
        _authorize(authorizer, "ALTER", "CLUSTER", "kafka-cluster")

    connect_proxy.add_routes(routes, connect, connector_action_guard)

    @routes.route("*", "/v1/{rest:.*}")
    async def unknown_api(request):
        raise ApiError(404, f"no such API: {request.method} {request.path} (see docs/console.md)")

    # -- the console -----------------------------------------------------------------------

    index = assets["index.html"][0]

    @routes.get("/")
    async def page(request):
        return web.Response(
            body=index,
            headers={"Content-Type": "text/html; charset=utf-8", "Content-Security-Policy": _PAGE_POLICY,
                     "Cache-Control": "no-cache", **_SECURITY_HEADERS},
        )  # fmt: skip

    @routes.get("/static/{name:.+}")
    async def asset(request):
        found = assets.get(request.match_info["name"])
        if found is None:
            raise web.HTTPNotFound(text="no such file\n")
        body, kind = found
        return web.Response(
            body=body, headers={"Content-Type": kind, "Cache-Control": "no-cache", **_SECURITY_HEADERS}
        )

    app.add_routes(routes)
    return app


def _json(data, status: int = 200) -> web.Response:
    return web.Response(
        text=json.dumps(data, separators=(",", ":")),
        status=status,
        content_type="application/json",
        headers={"Cache-Control": "no-store", **_SECURITY_HEADERS},
    )


def _authorize(authorizer: ConsoleAuthorizer, operation: str, resource_type: str, name: str) -> None:
    refusal = authorizer.check(ANONYMOUS, operation, resource_type, name)
    if refusal:
        raise ApiError(403, refusal)


async def _body(request) -> dict:
    """The JSON object an action carries; refuses other content and foreign origins."""
    origin = request.headers.get("Origin")
    if origin is not None and urlsplit(origin).netloc != request.host:
        raise ApiError(
            403, f"actions are accepted only from this console's own pages, not from {origin[:100]}"
        )
    if request.content_type != "application/json":
        raise ApiError(415, "send the action's parameters as JSON (Content-Type: application/json)")
    try:
        body = await request.json()
    except web.HTTPRequestEntityTooLarge:
        raise ApiError(413, f"the request body is larger than {MAX_BODY_BYTES} bytes") from None
    except (ValueError, UnicodeDecodeError):
        raise ApiError(400, "the request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return body


@web.middleware
async def _errors(request, handler):
    try:
        return await handler(request)
    except ApiError as exc:
        return _json({"error": exc.message}, status=exc.status)
    except KafkaError as exc:
        status = 404 if exc.code in _NOT_FOUND_CODES else 400
        return _json({"error": exc.message, "code": exc.code.name.upper()}, status=status)
    except web.HTTPException:
        raise
    except Exception:
        log.exception("HTTP %s %s failed", request.method, request.path)
        return _json({"error": "internal error; the broker's log has the details"}, status=500)
