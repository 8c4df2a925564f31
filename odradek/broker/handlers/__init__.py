"""The API registry: one module per API family registers its handler and version range.

ApiVersions is built from this registry, so the broker advertises exactly what it
implements. A handler is ``handler(broker, request) -> result`` where result is

- a kio response entity, encoded by the dispatcher at the request's version;
- a ``RawResponse`` whose body parts were packed by hand (hot paths: Produce, Fetch);
- ``None`` for no response at all (Produce with acks=0);
- or a coroutine that produces one of the above (delayed operations).

Raising ``KafkaError`` from a handler answers nothing and closes the connection, as
Kafka does for requests it cannot make sense of; per-item failures belong in the
response's error codes instead.

An API may also register a fast lane, ``lane(broker, frame) -> bytes | None``: it is
offered each whole request frame of that API key first and returns the complete
response frame (empty bytes: no response), or None to decline, having changed nothing,
so that the handler gets the request as usual. Produce has one for its usual shape
(see handlers/produce.py); a lane raises ``KafkaError`` like a handler. With an authorizer
the lane is called as ``lane(broker, frame, may_write)``: it must decline (None) for a topic
``may_write(name)`` refuses, so that the handler answers the authorization error.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple


class ApiSpec(NamedTuple):
    api_key: int
    name: str
    min_version: int
    max_version: int
    handler: Callable


@dataclass(slots=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    peer: str = ""
    listener: str = "PLAINTEXT"
    principal: str = "User:ANONYMOUS"
    received_ns: int = 0
    extra: dict = field(default_factory=dict)


@dataclass(slots=True)
class RawResponse:
    """A response body packed by the handler, as buffers written in order.

    ``has_files`` marks bodies holding file slices (streamed from the files as the socket
    drains), ``sendfile`` that they should go with sendfile where the socket allows;
    ``throttle_at`` is where throttle_time_ms lies in ``parts[0]`` (from its end when
    negative), for the request-time quota to set it."""

    parts: list
    has_files: bool = False
    sendfile: bool = False
    throttle_at: int | None = None


REGISTRY: dict[int, ApiSpec] = {}
FAST_LANES: dict[int, Callable] = {}


def api(api_key: int, min_version: int, max_version: int, name: str | None = None):
    """Register ``fn`` as the handler of ``api_key`` for versions min..max inclusive."""

    def register(fn: Callable) -> Callable:
        from odradek.protocol.messages import api_name, known_versions

        known = known_versions(api_key)
        if min_version not in known or max_version not in known:
            raise ValueError(f"{api_name(api_key)} v{min_version}-{max_version}: kio knows only {known}")
        if api_key in REGISTRY:
            raise ValueError(f"{api_name(api_key)} registered twice")
        REGISTRY[api_key] = ApiSpec(api_key, name or api_name(api_key), min_version, max_version, fn)
        return fn

    return register


def fast_lane(api_key: int):
    """Register ``fn`` as the fast lane of ``api_key`` (see the module docstring)."""

    def register(fn: Callable) -> Callable:
        FAST_LANES[api_key] = fn
        return fn

    return register


def load_all() -> dict[int, ApiSpec]:
    """Import every handler module in this package (each registers itself)."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    return REGISTRY
