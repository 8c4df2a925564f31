"""The JSON shapes both views answer with, and the small computations they share.

Record keys, values and header values travel as base64 (the console shows them as text,
JSON or hex); a key or value longer than ``MAX_SHOWN_BYTES`` is cut there and marked
``truncated``. Lag is the high watermark minus the committed offset, never below 0
(kafka-exporter's definition), and only for partitions the group committed.
"""

from __future__ import annotations

import base64

from odradek.broker.config import ConfigSource

MAX_SHOWN_BYTES = 16 * 1024
MAX_RECORDS = 200

class ApiError(Exception):
    """An answer other than 200: ``status`` and a sentence saying what to do."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def not_found(what: str) -> ApiError:
    return ApiError(404, f"{what} does not exist")


def _b64(data: bytes | None, limit: int) -> str | None:
    if data is None:
        return None
    return base64.b64encode(bytes(data[:limit])).decode()


def record_json(offset, timestamp, timestamp_type, key, value, headers) -> dict:
    key_size = -1 if key is None else len(key)
    value_size = -1 if value is None else len(value)
    return {
        "offset": offset,
        "timestamp": timestamp,
        "timestamp_type": "LogAppendTime" if timestamp_type == 1 else "CreateTime",
        "key": _b64(key, MAX_SHOWN_BYTES),
        "value": _b64(value, MAX_SHOWN_BYTES),
        "key_size": key_size,
        "value_size": value_size,
        "truncated": key_size > MAX_SHOWN_BYTES or value_size > MAX_SHOWN_BYTES,
        "headers": [[k, _b64(v, MAX_SHOWN_BYTES)] for k, v in headers or ()],
    }


def config_json(name, value, source, sensitive, read_only) -> dict:
    return {
        "name": name,
        "value": None if sensitive else value,
        "source": _source_name(int(source)),
        "is_default": int(source) == 5,
        "sensitive": bool(sensitive),
        "read_only": bool(read_only),
    }


def _source_name(source: int) -> str:
    """Kafka's name for a DescribeConfigs config_source (DEFAULT_CONFIG, ...)."""
    try:
        return ConfigSource(source).name
    except ValueError:
        return str(source)


def lag(committed: int | None, end: int | None) -> int | None:
    if committed is None or committed < 0 or end is None or end < 0:
        return None
    return max(end - committed, 0)


def group_offsets_json(committed: dict, ends: dict) -> tuple[list[dict], int]:
    """Rows per (topic, partition) of ``committed`` offsets against ``ends``, and the total lag."""
    rows = []
    total = 0
    for (topic, partition), offset in sorted(committed.items()):
        end = ends.get((topic, partition))
        behind = lag(offset, end)
        total += behind or 0
        rows.append({"topic": topic, "partition": partition, "committed": offset, "end": end, "lag": behind})
    return rows, total


def reset_refusal(group_id: str, code_name: str, detail: str | None = None) -> str:
    """Why a group's offsets could not be reset, and what to do."""
    if code_name in ("UNKNOWN_MEMBER_ID", "REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION"):
        return (
            f"group {group_id!r} has active members; stop its consumers first "
            f"(offsets are reset only while a group is empty) [{code_name}]"
        )
    return f"resetting the offsets of group {group_id!r} failed: {detail or code_name} [{code_name}]"


def parse_int(params, name: str, default=None, *, low: int | None = None, high: int | None = None):
    """An integer query or body parameter, with a 400 that names it."""
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ApiError(400, f"{name} must be an integer, got {str(raw)[:40]!r}") from None
    if isinstance(raw, bool):
        raise ApiError(400, f"{name} must be an integer, got {raw!r}")
    if low is not None and value < low:
        raise ApiError(400, f"{name} must be at least {low}, got {value}")
    if high is not None and value > high:
        raise ApiError(400, f"{name} must be at most {high}, got {value}")
    return value


def cluster_json(cluster_id, controller_id: int, brokers: list[dict], topics: list[dict]) -> dict:
    """The overview: brokers (with how many replicas and leaders each holds), racks, and the
    topic, partition, under-replicated and offline counts over ``topics`` (each a dict with
    ``name``, ``internal`` and ``partitions`` of ``leader``/``replicas``/``isr``)."""
    live = {b["id"] for b in brokers}
    hosted = dict.fromkeys(live, 0)
    leading = dict.fromkeys(live, 0)
    partitions = under = offline = 0
    for topic in topics:
        for p in topic["partitions"]:
            partitions += 1
            for replica in p["replicas"]:
                if replica in hosted:
                    hosted[replica] += 1
            if p["leader"] in leading:
                leading[p["leader"]] += 1
            else:
                offline += 1
            if len(p["isr"]) < len(p["replicas"]):
                under += 1
    rows = [
        {
            **b,
            "controller": b["id"] == controller_id,
            "replicas": hosted[b["id"]],
            "leaders": leading[b["id"]],
        }
        for b in sorted(brokers, key=lambda b: b["id"])
    ]
    return {
        "cluster_id": cluster_id,
        "controller_id": controller_id,
        "brokers": rows,
        "racks": sorted({b["rack"] for b in brokers if b.get("rack")}),
        "topics": sum(1 for t in topics if not t["internal"]),
        "internal_topics": sum(1 for t in topics if t["internal"]),
        "partitions": partitions,
        "under_replicated": under,
        "offline": offline,
    }
