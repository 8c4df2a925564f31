"""The console's window on a schema registry: ``GET /v1/schemas/<registry path>``, read only.

The Schemas page reads subjects, versions and compatibility levels through this route, so
it stays on the console's own origin (its Content-Security-Policy allows no other). Only
GETs of the read endpoints are passed on; the registry is the one the broker runs beside
it (``schema.registry.listeners``) or, for ``odradek console``, ``--schema-registry-url``.
The browser's ``Authorization`` header travels with the request and a 401 comes back with
the registry's ``WWW-Authenticate``, so a registry that asks basic credentials gets them
from the browser's own prompt. Registry errors become the console API's
``{"error": message}`` with the registry's status and ``error_code``, except a subject
without a level of its own (the registry's 404/40408), answered ``{"compatibilityLevel": null}``.
"""

from __future__ import annotations

import json
import re
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

from aiohttp import ClientError, ClientSession, ClientTimeout, web

from odradek.http.shapes import ApiError

# The registry's read endpoints the page uses (anything else is refused here).
READABLE = re.compile(r"^(subjects|subjects/[^/]+/versions(/[^/]+(/schema|/referencedby)?)?|config(/[^/]+)?|mode(/[^/]+)?|schemas/ids/\d+|schemas/types)$")
TIMEOUT = ClientTimeout(total=15)


@dataclass
class SchemaRegistryLink:
    """Where the registry is: ``url()`` (None: no registry) and how to check its TLS certificate."""

    url: Callable[[], str | None]
    ssl_context: ssl.SSLContext | bool | None = None  # None: the system's CAs; False: no check

    async def get(self, path: str, query: str, authorization: str | None) -> web.Response:
        base = self.url()
        if not base:
            raise ApiError(
                404,
                "no schema registry: the broker serves one on schema.registry.listeners (empty here), "
                "and `odradek console` reads one given with --schema-registry-url",
            )
        if not READABLE.match(path):
            raise ApiError(404, f"the console reads only the registry's subjects, versions, config and mode, not /{path}")
        headers = {"Accept": "application/vnd.schemaregistry.v1+json"}
        if authorization:
            headers["Authorization"] = authorization
        target = f"{base.rstrip('/')}/{quote(path, safe='/')}" + (f"?{query}" if query else "")
        try:
            async with ClientSession(timeout=TIMEOUT) as session:
                async with session.get(target, headers=headers, ssl=self.ssl_context) as resp:
                    text = await resp.text()
                    status, challenge = resp.status, resp.headers.get("WWW-Authenticate")
        except (ClientError, TimeoutError, OSError) as exc:
            raise ApiError(502, f"the schema registry at {base} does not answer: {exc or type(exc).__name__}") from None
        try:
            body = json.loads(text)
        except ValueError:
            raise ApiError(502, f"the schema registry at {base} answered {status} without JSON") from None
        if status == 404 and isinstance(body, dict) and body.get("error_code") == 40408:
            return web.json_response({"compatibilityLevel": None}, headers={"Cache-Control": "no-store"})
        if status >= 400:
            message = body.get("message") if isinstance(body, dict) else None
            body = {"error": message or f"registry error {status}", "error_code": body.get("error_code") if isinstance(body, dict) else None}
        extra = {"WWW-Authenticate": challenge} if status == 401 and challenge else {}
        return web.json_response(body, status=status, headers={"Cache-Control": "no-store", **extra})


def add_routes(routes: web.RouteTableDef, link: SchemaRegistryLink | None) -> None:
    @routes.get("/v1/schemas/{path:.+}")
    async def schemas(request):
        if link is None:
            raise ApiError(404, "no schema registry is configured for this console")
        return await link.get(request.match_info["path"], request.query_string, request.headers.get("Authorization"))
