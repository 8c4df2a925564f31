"""The console's window on Kafka Connect clusters: ``/v1/connect``, fetched server-side.

The Connectors page reads each configured Connect REST URL (``console.connect.urls`` on a
broker, ``--connect-url`` for ``odradek console``) through these routes, so the browser
talks only to the console's own origin (no CORS on the workers). Any worker that speaks
Kafka Connect's REST API answers: Odradek's or Apache Kafka's.

- ``GET /v1/connect``: per URL, the worker's version and cluster id and its connectors
  from ``GET /connectors?expand=status&expand=info`` (type, state, worker, tasks with their
  state, worker and trace, config); a worker that does not answer carries ``error``.
- ``POST /v1/connect/{cluster}/connectors/{name}/{pause|resume|restart}``: the worker's
  ``PUT …/pause``, ``PUT …/resume`` or ``POST …/restart?includeTasks=true`` (``cluster``
  is the URL's index in the list).

Credentials in a URL (``http://user:password@host:8083``) go to the worker as basic
authentication and are never shown.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import quote, urlsplit, urlunsplit

from aiohttp import BasicAuth, ClientError, ClientSession, ClientTimeout, web

from odradek.http.shapes import ApiError

TIMEOUT = ClientTimeout(total=10)
NOT_CONFIGURED = (
    "no Kafka Connect cluster is configured: set console.connect.urls on the broker (comma-separated "
    "REST URLs, e.g. http://127.0.0.1:8083), or start `odradek console --connect-url http://127.0.0.1:8083`"
)
# The console's action name -> the worker's method and path suffix.
ACTIONS = {
    "pause": ("PUT", "pause"),
    "resume": ("PUT", "resume"),
    "restart": ("POST", "restart?includeTasks=true&onlyFailed=false"),
}


def _split_credentials(url: str) -> tuple[str, BasicAuth | None]:
    """(the URL without user:password@, the basic authentication it carried)."""
    parts = urlsplit(url.strip().rstrip("/"))
    if parts.username is None:
        return urlunsplit(parts), None
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc)), BasicAuth(parts.username, parts.password or "")


@dataclass
class ConnectLink:
    """Where the Connect clusters are: ``urls()`` (empty: none configured)."""

    urls: Callable[[], list[str]]

    def _target(self, cluster: int) -> tuple[str, BasicAuth | None]:
        urls = [u for u in self.urls() if u.strip()]
        if not urls:
            raise ApiError(404, NOT_CONFIGURED)
        if not 0 <= cluster < len(urls):
            raise ApiError(
                404, f"no Connect cluster {cluster}: {len(urls)} configured (0 to {len(urls) - 1})"
            )
        return _split_credentials(urls[cluster])

    async def _call(self, session: ClientSession, method: str, cluster: int, path: str):
        base, auth = self._target(cluster)
        try:
            async with session.request(
                method, base + path, auth=auth, json=None if method == "GET" else {}
            ) as resp:
                status = resp.status
                text = await resp.text()
                body = json.loads(text) if text.strip() else None
        except (ClientError, TimeoutError, OSError) as exc:
            raise ApiError(
                502, f"the Connect worker at {base} does not answer: {exc or type(exc).__name__}"
            ) from None
        except ValueError:
            raise ApiError(502, f"the Connect worker at {base} answered {status} without JSON") from None
        if status >= 400:
            message = body.get("message") if isinstance(body, dict) else None
            raise ApiError(
                status if status < 500 else 502, f"Connect worker {base}: {message or f'HTTP {status}'}"
            )
        return body

    async def overview(self) -> dict:
        count = len([u for u in self.urls() if u.strip()])
        if not count:
            return {"configured": False, "message": NOT_CONFIGURED, "clusters": []}
        async with ClientSession(timeout=TIMEOUT) as session:
            clusters = await asyncio.gather(*(self._cluster(session, i) for i in range(count)))
        return {"configured": True, "clusters": clusters}

    async def _cluster(self, session: ClientSession, index: int) -> dict:
        url = self._target(index)[0]
        try:
            root, listing = await asyncio.gather(
                self._call(session, "GET", index, "/"),
                self._call(session, "GET", index, "/connectors?expand=status&expand=info"),
            )
        except ApiError as exc:
            return {"index": index, "url": url, "error": exc.message, "connectors": []}
        connectors = [connector_view(name, entry) for name, entry in sorted((listing or {}).items())]
        return {
            "index": index,
            "url": url,
            "version": root.get("version"),
            "kafka_cluster_id": root.get("kafka_cluster_id"),
            "connectors": connectors,
        }

    async def act(self, cluster: int, name: str, action: str) -> dict:
        if action not in ACTIONS:
            raise ApiError(404, f"no connector action {action!r}: pause, resume or restart")
        method, suffix = ACTIONS[action]
        async with ClientSession(timeout=TIMEOUT) as session:
            await self._call(session, method, cluster, f"/connectors/{quote(name, safe='')}/{suffix}")
        return {"cluster": cluster, "name": name, "action": action}


def connector_view(name: str, entry: dict) -> dict:
    """One connector as the page shows it, from its ``expand=status`` and ``expand=info`` parts."""
    status, info = entry.get("status") or {}, entry.get("info") or {}
    own = status.get("connector") or {}
    tasks = sorted(status.get("tasks") or [], key=lambda t: t.get("id", 0))
    return {
        "name": name,
        "type": status.get("type") or info.get("type"),
        "state": own.get("state"),
        "worker_id": own.get("worker_id"),
        "trace": own.get("trace"),
        "tasks": [
            {
                "id": t.get("id"),
                "state": t.get("state"),
                "worker_id": t.get("worker_id"),
                "trace": t.get("trace"),
            }
            for t in tasks
        ],
        "config": info.get("config") or {},
    }


def add_routes(
    routes: web.RouteTableDef, link: ConnectLink | None, guard: Callable[[web.Request], Awaitable[None]]
) -> None:
    """``guard(request)`` raises ApiError when an action may not pass (its origin, body, ACLs)."""

    def json_response(data) -> web.Response:
        return web.json_response(data, headers={"Cache-Control": "no-store"})

    @routes.get("/v1/connect")
    async def connect_overview(request):
        if link is None:
            return json_response({"configured": False, "message": NOT_CONFIGURED, "clusters": []})
        return json_response(await link.overview())

    @routes.post("/v1/connect/{cluster:\\d+}/connectors/{name}/{action}")
    async def connector_action(request):
        if link is None:
            raise ApiError(404, NOT_CONFIGURED)
        await guard(request)
        return json_response(await link.act(int(request.match_info["cluster"]), request.match_info["name"],
                                            request.match_info["action"]))  # fmt: skip
