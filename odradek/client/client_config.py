"""Client options: Kafka's config names with underscores, or a dict of the dotted names.

``resolve(kind, config, kwargs)`` merges both spellings, rejects unknown options (with a
suggestion) and bad values (naming the option), fills in Kafka's defaults and returns a
plain dict keyed by the underscore names.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable

from odradek.client.client_errors import ConfigError

_UNSET = object()


def _int(low: int | None = None, high: int | None = None):
    def check(name, value):
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise ConfigError(f"{name} must be an integer, got {value!r}")
        try:
            value = int(value)
        except ValueError:
            raise ConfigError(f"{name} must be an integer, got {value!r}") from None
        if low is not None and value < low:
            raise ConfigError(f"{name} must be >= {low}, got {value}")
        if high is not None and value > high:
            raise ConfigError(f"{name} must be <= {high}, got {value}")
        return value

    return check


def _bool(name, value):
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(f"{name} must be true or false, got {value!r}")


def _choice(*choices):
    def check(name, value):
        v = value.lower() if isinstance(value, str) else value
        if v not in choices:
            raise ConfigError(f"{name} must be one of {', '.join(map(str, choices))}; got {value!r}")
        return v

    return check


def _optional_str(name, value):
    if value is None or isinstance(value, str):
        return value
    raise ConfigError(f"{name} must be a string, got {value!r}")


def _str(name, value):
    if isinstance(value, str) and value:
        return value
    raise ConfigError(f"{name} must be a non-empty string, got {value!r}")


def _callable_or_none(name, value):
    if value is None or callable(value):
        return value
    raise ConfigError(f"{name} must be callable, got {value!r}")


def _any(name, value):
    return value


def parse_bootstrap(value, name: str = "bootstrap_servers") -> list[tuple[str, int]]:
    """``host:port[,host:port...]`` (or a list of them; a ``PLAINTEXT://`` prefix and IPv6
    brackets allowed, port 9092 by default) as ``[(host, port), ...]``; ConfigError if bad."""
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, list | tuple):
        items = [str(v).strip() for v in value]
    else:
        raise ConfigError(f"{name} must be 'host:port[,host:port...]' or a list, got {value!r}")
    if not items:
        raise ConfigError(f"{name} is required (e.g. '127.0.0.1:9092')")
    out = []
    for item in items:
        item = re.sub(r"^[A-Za-z_]+://", "", item)
        host, sep, port = item.rpartition(":")
        if not sep:
            host, port = item, "9092"
        host = host.strip("[]")
        try:
            port_n = int(port)
        except ValueError:
            raise ConfigError(f"{name}: bad port in {item!r}") from None
        if not host or not 0 < port_n < 65536:
            raise ConfigError(f"{name}: bad address {item!r}")
        out.append((host, port_n))
    return out


def _acks(name, value):
    if value in ("all", -1, "-1"):
        return -1
    if value in (0, 1, "0", "1"):
        return int(value)
    raise ConfigError(f"{name} must be 'all', -1, 0 or 1; got {value!r}")


def _compression(name, value):
    if value is None:
        return "none"
    return _choice("none", "gzip", "snappy", "lz4", "zstd")(name, value)


def _security(name, value):
    v = _choice("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")(name, value)
    if v != "plaintext":
        raise ConfigError(f"{name}={value!r} is not supported by this client yet (only PLAINTEXT)")
    return v


def _transactional_id(name, value):
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{name} must be a non-empty string or None; got {value!r}")
    return value


def _list(name, value):
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return list(value)
    return [value]


def _strategies(name, value):
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    elif not isinstance(value, list | tuple):
        value = [value]
    if not value:
        raise ConfigError(f"{name} must name at least one assignor")
    return list(value)


Spec = tuple[object, Callable]

COMMON: dict[str, Spec] = {
    "bootstrap_servers": (_UNSET, lambda name, value: parse_bootstrap(value, name)),
    "client_id": (None, _optional_str),
    "request_timeout_ms": (30000, _int(1)),
    "retry_backoff_ms": (100, _int(0)),
    "retry_backoff_max_ms": (1000, _int(0)),
    "reconnect_backoff_ms": (50, _int(0)),
    "reconnect_backoff_max_ms": (1000, _int(0)),
    "socket_connection_setup_timeout_ms": (10000, _int(1)),
    "connections_max_idle_ms": (540000, _int(-1)),
    "metadata_max_age_ms": (300000, _int(0)),
    "security_protocol": ("plaintext", _security),
    "receive_buffer_bytes": (-1, _int(-1)),
    "send_buffer_bytes": (-1, _int(-1)),
}

PRODUCER: dict[str, Spec] = {
    "acks": (-1, _acks),
    "batch_size": (16384, _int(0)),
    "linger_ms": (5, _int(0)),
    "buffer_memory": (33554432, _int(1)),
    "max_block_ms": (60000, _int(0)),
    "max_request_size": (1048576, _int(1)),
    "retries": (2147483647, _int(0)),
    "delivery_timeout_ms": (120000, _int(1)),
    "max_in_flight_requests_per_connection": (5, _int(1)),
    "enable_idempotence": (True, _bool),
    "transactional_id": (None, _transactional_id),
    "transaction_timeout_ms": (60000, _int(1)),
    "compression_type": ("none", _compression),
    "partitioner": (None, _any),
    "key_serializer": (None, _callable_or_none),
    "value_serializer": (None, _callable_or_none),
    "interceptors": ([], _list),
    "metadata_max_idle_ms": (300000, _int(5000)),
}

CONSUMER: dict[str, Spec] = {
    "group_id": (None, _optional_str),
    "group_instance_id": (None, _optional_str),
    "group_protocol": ("classic", _choice("classic", "consumer")),
    "session_timeout_ms": (45000, _int(1)),
    "heartbeat_interval_ms": (3000, _int(1)),
    "max_poll_interval_ms": (300000, _int(1)),
    "max_poll_records": (500, _int(1)),
    "auto_offset_reset": ("latest", _choice("earliest", "latest", "none")),
    "enable_auto_commit": (True, _bool),
    "auto_commit_interval_ms": (5000, _int(0)),
    "fetch_min_bytes": (1, _int(0)),
    "fetch_max_wait_ms": (500, _int(0)),
    "fetch_max_bytes": (52428800, _int(0)),
    "max_partition_fetch_bytes": (1048576, _int(0)),
    "isolation_level": ("read_uncommitted", _choice("read_uncommitted", "read_committed")),
    "partition_assignment_strategy": (["range", "cooperative-sticky"], _strategies),
    "key_deserializer": (None, _callable_or_none),
    "value_deserializer": (None, _callable_or_none),
    "interceptors": ([], _list),
    "check_crcs": (True, _bool),
    "exclude_internal_topics": (True, _bool),
    "allow_auto_create_topics": (True, _bool),
    "default_api_timeout_ms": (60000, _int(0)),
    "client_rack": (None, _optional_str),
}

SHARE_CONSUMER: dict[str, Spec] = {
    "group_id": (None, _optional_str),
    "share_acknowledgement_mode": ("implicit", _choice("implicit", "explicit")),
    "max_poll_records": (500, _int(1)),
    "fetch_max_wait_ms": (500, _int(0)),
    "fetch_max_bytes": (52428800, _int(0)),
}

ADMIN: dict[str, Spec] = {
    "default_api_timeout_ms": (60000, _int(0)),
}

_KINDS = {
    "producer": {**COMMON, **PRODUCER},
    "consumer": {**COMMON, **CONSUMER},
    "admin": {**COMMON, **ADMIN},
    "share_consumer": {**COMMON, **SHARE_CONSUMER},
}


def _canonical(name: str) -> str:
    return name.strip().replace(".", "_").replace("-", "_").lower()


def resolve(kind: str, config: dict | None, kwargs: dict) -> dict:
    specs = _KINDS[kind]
    given: dict[str, tuple[str, object]] = {}
    for source in (config or {}), kwargs:
        if not isinstance(source, dict):
            raise ConfigError(f"config must be a dict of Kafka option names, got {source!r}")
        for raw, value in source.items():
            name = _canonical(raw)
            if name not in specs:
                hint = difflib.get_close_matches(name, specs, n=1)
                also = f"; did you mean {hint[0]!r}?" if hint else ""
                raise ConfigError(f"unknown {kind} option {raw!r}{also}")
            if name in given and given[name][1] != value:
                raise ConfigError(f"option {name!r} given twice ({given[name][0]!r} and {raw!r})")
            given[name] = (raw, value)
    out = {}
    for name, (default, check) in specs.items():
        if name in given:
            raw, value = given[name]
            out[name] = check(raw, value)
        elif default is _UNSET:
            raise ConfigError(f"{kind} option {name!r} is required")
        else:
            out[name] = check(name, default) if isinstance(default, list) else default
    return out
