"""Building requests for whatever version a connection negotiated.

Each API version has its own kio dataclass with slightly different fields. ``build``
takes one dict of values for all versions: fields the chosen version lacks are dropped,
fields the caller did not give get their zero value (0, "", (), or None when nullable).
Nested entities and arrays of them are given as dicts and lists of dicts. Durations and
timestamps may be given as integer milliseconds.

``CLIENT_MAX`` caps versions where a newer version changes what the client must do
(topic ids instead of names), so negotiation never picks a version the client cannot use.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import MISSING, fields, is_dataclass
from functools import cache
from types import EllipsisType, NoneType, UnionType
from typing import Union, get_args, get_origin

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import known_versions, request_class

PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
FIND_COORDINATOR = 10
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
DELETE_RECORDS = 21
INIT_PRODUCER_ID = 22
ADD_PARTITIONS_TO_TXN = 24
ADD_OFFSETS_TO_TXN = 25
END_TXN = 26
TXN_OFFSET_COMMIT = 28
DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
CREATE_PARTITIONS = 37
DELETE_GROUPS = 42
INCREMENTAL_ALTER_CONFIGS = 44
OFFSET_DELETE = 47
DESCRIBE_CLUSTER = 60
DESCRIBE_LOG_DIRS = 35

# Highest version the client code handles per API (newer ones switch to topic ids or
# change semantics the client does not implement).
CLIENT_MAX = {
    PRODUCE: 12,
    FETCH: 12,
    LIST_OFFSETS: 9,
    METADATA: 12,
    OFFSET_COMMIT: 9,
    OFFSET_FETCH: 9,
    FIND_COORDINATOR: 6,
    JOIN_GROUP: 9,
    HEARTBEAT: 4,
    LEAVE_GROUP: 5,
    SYNC_GROUP: 5,
    DESCRIBE_GROUPS: 5,
    LIST_GROUPS: 5,
    API_VERSIONS: 3,
    CREATE_TOPICS: 7,
    DELETE_TOPICS: 5,
    DELETE_RECORDS: 2,
    INIT_PRODUCER_ID: 5,
    ADD_PARTITIONS_TO_TXN: 3,  # v4+ are broker-to-broker (batched, verify-only)
    ADD_OFFSETS_TO_TXN: 4,
    END_TXN: 4,  # v5+: transactions v2 (an epoch bump per transaction)
    TXN_OFFSET_COMMIT: 4,  # v5+: transactions v2
    DESCRIBE_CONFIGS: 4,
    ALTER_CONFIGS: 2,
    CREATE_PARTITIONS: 3,
    DELETE_GROUPS: 2,
    INCREMENTAL_ALTER_CONFIGS: 1,
    OFFSET_DELETE: 0,
    DESCRIBE_CLUSTER: 1,
    DESCRIBE_LOG_DIRS: 4,
}


# Lowest version the client uses: Produce v3 is the first with v2 record batches (the only
# kind this producer writes); Fetch v4 the first with isolation levels.
CLIENT_MIN = {PRODUCE: 3, FETCH: 4}


def client_versions(api_key: int) -> range:
    known = known_versions(api_key)
    if not known:
        return known
    top = min(known.stop - 1, CLIENT_MAX.get(api_key, known.stop - 1))
    return range(max(known.start, CLIENT_MIN.get(api_key, 0)), top + 1)


def negotiate(broker_versions: dict[int, tuple[int, int]]) -> dict[int, int]:
    """The version to use per API: the highest both sides support."""
    chosen = {}
    for api_key, (low, high) in broker_versions.items():
        ours = client_versions(api_key)
        if not ours:
            continue
        top = min(high, ours.stop - 1)
        if top >= max(low, ours.start):
            chosen[api_key] = top
    return chosen


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


def ms(value) -> int:
    """Milliseconds from a kio duration field (timedelta) or an int."""
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    return int(value)
