"""Request and response messages: headers by hand, bodies through kio.

Kafka's header rules: a request uses header v2 when its API version is flexible, else v1;
a response uses header v1 when flexible, else v0 — except ApiVersions, whose response
always uses header v0 so that a client can read it before it knows what we support.
kio records those choices in each message class's ``__header_schema__``.

Everything here is pure: bytes in, dataclasses out.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
from functools import cache
from typing import TYPE_CHECKING, NamedTuple, cast

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from odradek.protocol import produce_request, wellformed
from odradek.protocol.inter_broker import SCHEMAS as INTER_BROKER_SCHEMAS
from odradek.protocol.varint import VarintError, skip_tagged_fields

if TYPE_CHECKING:
    from kio.static.protocol import Entity, Payload

PRODUCE_KEY = 0
API_VERSIONS_KEY = 18

_HEAD = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
_SIZE_AND_CORRELATION = struct.Struct(">ii")


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


class MalformedRequest(ValueError):
    """The bytes do not form a request we can parse; the connection should be closed."""


class MalformedResponse(ValueError):
    """The bytes do not form the response we asked for; the connection should be closed."""


def api_name(api_key: int) -> str:
    if api_key in INTER_BROKER_SCHEMAS:
        return INTER_BROKER_SCHEMAS[api_key][0]
    return api_key_map.get(api_key, f"unknown({api_key})")


@cache
def known_versions(api_key: int) -> range:
    """The versions we can parse: kio's schemas, plus Produce v0-v2 (``produce_request``) and
    our own inter-broker schemas (``protocol.inter_broker``)."""
    if api_key in INTER_BROKER_SCHEMAS:
        version = INTER_BROKER_SCHEMAS[api_key][1]
        return range(version, version + 1)
    name = api_key_map.get(api_key)
    if name is None:
        return range(0)
    versions = sorted(schema_name_map[name])
    if api_key == PRODUCE_KEY:
        return range(0, versions[-1] + 1)
    return range(versions[0], versions[-1] + 1)


def _is_legacy_produce(api_key: int, api_version: int) -> bool:
    return api_key == PRODUCE_KEY and api_version < produce_request.FIRST_KIO_VERSION


@cache
def request_class(api_key: int, api_version: int) -> type[Payload]:
    if api_key in INTER_BROKER_SCHEMAS:
        return _inter_broker_class(api_key, api_version, 2)
    return load_payload_module(api_key, api_version, EntityType.request).__dict__[
        _class_name(api_key, "Request")
    ]


@cache
def response_class(api_key: int, api_version: int) -> type[Payload]:
    if api_key in INTER_BROKER_SCHEMAS:
        return _inter_broker_class(api_key, api_version, 3)
    return load_payload_module(api_key, api_version, EntityType.response).__dict__[
        _class_name(api_key, "Response")
    ]


def _inter_broker_class(api_key: int, api_version: int, which: int) -> type[Payload]:
    name, version, request, response = INTER_BROKER_SCHEMAS[api_key]
    if api_version != version:
        raise KeyError(f"{name} v{api_version}: only v{version} is known")
    # declared by our decorators, which mypy does not see: they carry Payload's class variables
    return cast("type[Payload]", request if which == 2 else response)


def _class_name(api_key: int, suffix: str) -> str:
    return "".join(part.capitalize() for part in api_key_map[api_key].split("_")) + suffix


@cache
def is_flexible(api_key: int, api_version: int) -> bool:
    if _is_legacy_produce(api_key, api_version):
        return False
    return bool(request_class(api_key, api_version).__flexible__)


@cache
def _reader(cls: type[Entity]):
    return entity_reader(cls)


@cache
def _writer(cls: type[Entity]):
    return entity_writer(cls)


def _skip_tagged_fields(buf, pos: int) -> int:
    try:
        return skip_tagged_fields(buf, pos)
    except (VarintError, IndexError) as exc:
        raise MalformedRequest(f"malformed tagged fields: {exc or 'truncated'}") from None


def parse_request_header(payload) -> tuple[RequestHeader, int]:
    """Parse the header of a request frame (without its size prefix).

    Returns the header and the position where the body starts. The header version is
    derived from the API key and version; for keys or versions we have no schema for, the
    v1 layout is assumed (that is all a broker needs to answer with an error).
    """
    if len(payload) < _HEAD.size:
        raise MalformedRequest(f"request of {len(payload)} bytes is shorter than a request header")
    api_key, api_version, correlation_id, client_len = _HEAD.unpack_from(payload, 0)
    pos = _HEAD.size
    client_id = None
    if client_len >= 0:
        end = pos + client_len
        if end > len(payload):
            raise MalformedRequest("client id runs past the end of the request")
        client_id = bytes(payload[pos:end]).decode("utf-8", "replace")
        pos = end
    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    if _request_header_v2(api_key, api_version):
        pos = _skip_tagged_fields(payload, pos)
    return header, pos


@cache
def _request_header_v2(api_key: int, api_version: int) -> bool:
    """Whether the request header carries tagged fields (a known, flexible version)."""
    return api_version in known_versions(api_key) and is_flexible(api_key, api_version)


def decode_request_body(header: RequestHeader, payload, pos: int):
    """Decode the body; raise MalformedRequest on any parse failure.

    Produce has a parser of its own; every other body is checked against its schema
    (``wellformed``) before kio, which would abort the process on a hostile length, reads it.
    """
    if header.api_key == PRODUCE_KEY:
        try:
            return produce_request.decode_produce_request(payload, pos, header.api_version)
        except (ValueError, UnicodeDecodeError) as exc:
            raise MalformedRequest(f"cannot decode Produce v{header.api_version}: {exc}") from exc
    cls = request_class(header.api_key, header.api_version)
    view = memoryview(payload).toreadonly()
    try:
        wellformed.check(cls, view, pos)
    except wellformed.MalformedMessage as exc:
        raise MalformedRequest(f"malformed {cls.__name__} v{header.api_version}: {exc}") from None
    try:
        entity, _ = _reader(cls)(view, pos)
    except Exception as exc:  # kio raises a variety of errors on bad input
        raise MalformedRequest(f"cannot decode {cls.__name__} v{header.api_version}: {exc}") from exc
    return entity


def encode_body(entity: Entity) -> bytes:
    out = io.BytesIO()
    _writer(type(entity))(out, entity)
    return out.getvalue()


def response_header(api_key: int, api_version: int, correlation_id: int) -> bytes:
    """The response header bytes (v0: correlation id; v1 adds an empty tagged-field set)."""
    if _response_header_v1(api_key, api_version):
        return _CORRELATION.pack(correlation_id) + b"\x00"
    return _CORRELATION.pack(correlation_id)


@cache
def _response_header_v1(api_key: int, api_version: int) -> bool:
    return api_key != API_VERSIONS_KEY and is_flexible(api_key, api_version)


def frame(*parts: bytes) -> bytes:
    """Join parts into one size-prefixed frame."""
    body = b"".join(parts)
    return _SIZE.pack(len(body)) + body


def response_prefix(api_key: int, api_version: int, correlation_id: int, body_size: int) -> bytes:
    """The size prefix and response header of a response whose body is ``body_size`` bytes."""
    if _response_header_v1(api_key, api_version):
        return _SIZE_AND_CORRELATION.pack(body_size + 5, correlation_id) + b"\x00"
    return _SIZE_AND_CORRELATION.pack(body_size + 4, correlation_id)


def size_prefix(size: int) -> bytes:
    return _SIZE.pack(size)


def encode_response(api_key: int, api_version: int, correlation_id: int, entity) -> bytes:
    return frame(response_header(api_key, api_version, correlation_id), encode_body(entity))


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, entity
) -> bytes:
    """A whole size-prefixed request frame (used by the client and by tests)."""
    cid = b"" if client_id is None else client_id.encode()
    head = _HEAD.pack(api_key, api_version, correlation_id, -1 if client_id is None else len(cid)) + cid
    if is_flexible(api_key, api_version):
        head += b"\x00"
    return frame(head, encode_body(entity))


def decode_response(api_key: int, api_version: int, payload) -> tuple[int, object]:
    """Decode a response frame (without its size prefix) into (correlation id, entity).

    Raises MalformedResponse: a hostile or broken broker cannot crash its client."""
    if len(payload) < 4:
        raise MalformedResponse(f"response of {len(payload)} bytes is shorter than a response header")
    (correlation_id,) = _CORRELATION.unpack_from(payload, 0)
    view = memoryview(payload).toreadonly()
    cls = response_class(api_key, api_version)
    try:
        pos = 4
        if api_key != API_VERSIONS_KEY and is_flexible(api_key, api_version):
            pos = skip_tagged_fields(view, pos)
        wellformed.check(cls, view, pos)
        entity, _ = _reader(cls)(view, pos)
    except Exception as exc:  # kio raises a variety of errors on bad input
        raise MalformedResponse(f"cannot decode {cls.__name__} v{api_version}: {exc or 'truncated'}") from None
    return correlation_id, entity


def decode_entity(cls: type, data, pos: int = 0) -> tuple[object, int]:
    """``(entity, size)`` of kio class ``cls`` read from ``data`` at ``pos``, after the schema
    check: for messages carried inside others (the consumer protocol's subscription and
    assignment bytes, which any group member writes). Raises wellformed.MalformedMessage
    (a ValueError), or kio's own errors, never aborts."""
    view = memoryview(data).toreadonly()
    wellformed.check(cls, view, pos)
    return _reader(cls)(view, pos)


def peek_correlation_id(payload) -> int:
    return _CORRELATION.unpack_from(payload, 0)[0]


# -- building version-specific messages from plain data --------------------------------
#
# kio has one set of classes per API version. Handlers of control APIs describe their
# response once, as dicts and lists; ``build`` turns that into the classes of the version
# asked for, dropping fields the version lacks and filling its defaults.


def build(cls: type, data: dict):
    """Instantiate kio class ``cls`` from a dict, recursively; unknown keys are dropped."""
    kwargs = {}
    for name, convert in _converters(cls):
        if name in data:
            kwargs[name] = convert(data[name])
    return cls(**kwargs)


def build_response(api_key: int, api_version: int, data: dict):
    return build(response_class(api_key, api_version), data)


def build_request(api_key: int, api_version: int, data: dict):
    return build(request_class(api_key, api_version), data)


@cache
def _converters(cls: type) -> tuple:
    import typing

    hints = typing.get_type_hints(cls)
    return tuple((f.name, _converter_for(hints[f.name])) for f in dataclasses.fields(cls))


def _identity(value):
    return value


def _converter_for(hint):
    import types
    import typing

    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        convert = _converter_for(inner[0])
        return lambda v: None if v is None else convert(v)
    if origin is tuple:
        convert = _converter_for(typing.get_args(hint)[0])
        return lambda v: tuple(convert(x) for x in v)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return lambda v: v if isinstance(v, hint) else build(hint, v)
    if hint is ErrorCode:
        return lambda v: v if isinstance(v, ErrorCode) else ErrorCode(int(v))
    if isinstance(hint, type) and issubclass(hint, datetime.timedelta):
        return lambda v: v if isinstance(v, datetime.timedelta) else datetime.timedelta(milliseconds=v)
    if isinstance(hint, type) and issubclass(hint, datetime.datetime):
        return lambda v: (
            v if isinstance(v, datetime.datetime) else datetime.datetime.fromtimestamp(v / 1000, datetime.UTC)
        )
    return _identity


def to_plain(entity):
    """The reverse of ``build``: a kio entity as dicts, lists and plain values."""
    if dataclasses.is_dataclass(entity):
        return {f.name: to_plain(getattr(entity, f.name)) for f in dataclasses.fields(entity)}
    if isinstance(entity, tuple):
        return [to_plain(x) for x in entity]
    if isinstance(entity, ErrorCode):
        return int(entity)
    if isinstance(entity, datetime.timedelta):
        return int(entity.total_seconds() * 1000)
    return entity
