"""Building requests for whatever version a connection negotiated.

Each API version has its own kio dataclass with slightly different fields. ``build``
takes one dict of values for all versions: fields the chosen version lacks are dropped,
fields the caller did not give get their zero value (0, "", (), or None when nullable).
Nested entities and arrays of them are given as dicts and lists of dicts. Durations and
timestamps may be given as integer milliseconds.

This is the requesting side's builder: it fills what a request needs so one call site
serves every version. (``messages.build`` is the broker's, for responses: it only
converts what it is given and leaves the rest to kio's defaults.)
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import MISSING, fields, is_dataclass
from functools import cache
from types import EllipsisType, NoneType, UnionType
from typing import Union, get_args, get_origin

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import request_class

_ZERO = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint8": 0,
    "uint16": 0,
    "uint32": 0,
    "uint64": 0,
    "float64": 0.0,
    "string": "",
    "bytes": b"",
    "records": b"",
    "bool": False,
    "error_code": 0,
}


def _unwrap_optional(tp):
    if get_origin(tp) in (UnionType, Union):
        args = [a for a in get_args(tp) if a is not NoneType]
        return args[0], True
    return tp, False


@cache
def _plan(cls):
    plan = []
    for f in fields(cls):
        tp, optional = _unwrap_optional(f.type)
        inner = None
        kind = "primitive"
        if get_origin(tp) is tuple:
            args = get_args(tp)
            if len(args) == 2 and isinstance(args[1], EllipsisType) and is_dataclass(args[0]):
                kind, inner = "entities", args[0]
            else:
                kind = "array"
        elif is_dataclass(tp):
            kind, inner = "entity", tp
        kafka_type = f.metadata.get("kafka_type", "")
        has_default = f.default is not MISSING or f.default_factory is not MISSING
        plan.append((f.name, kind, inner, kafka_type, optional, has_default))
    return tuple(plan)


def _convert(kafka_type: str, value):
    if kafka_type == "error_code" and not isinstance(value, ErrorCode):
        return ErrorCode(value)
    if kafka_type.startswith("timedelta") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kafka_type.startswith("datetime") and isinstance(value, int):
        return datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC)
    return value


def _zero(kind, inner, kafka_type, optional):
    if optional:
        return None
    if kind in ("entities", "array"):
        return ()
    if kind == "entity":
        return build(inner, {})
    if kafka_type == "uuid":
        return uuid.UUID(int=0)
    if kafka_type == "error_code":
        return ErrorCode.none
    if kafka_type.startswith("timedelta"):
        return datetime.timedelta(0)
    if kafka_type.startswith("datetime"):
        return datetime.datetime.fromtimestamp(0, tz=datetime.UTC)
    return _ZERO.get(kafka_type, 0)


def build(cls, values: dict):
    """An instance of kio class ``cls`` from ``values`` (see the module docstring)."""
    kwargs = {}
    for name, kind, inner, kafka_type, optional, has_default in _plan(cls):
        if name in values:
            value = values[name]
            if value is not None:
                if kind == "entities":
                    value = tuple(build(inner, v) if isinstance(v, dict) else v for v in value)
                elif kind == "entity" and isinstance(value, dict):
                    value = build(inner, value)
                elif kind == "array":
                    value = tuple(_convert(kafka_type, v) for v in value)
                else:
                    value = _convert(kafka_type, value)
            kwargs[name] = value
        elif not has_default:
            kwargs[name] = _zero(kind, inner, kafka_type, optional)
    return cls(**kwargs)


def build_request(api_key: int, version: int, values: dict):
    return build(request_class(api_key, version), values)

