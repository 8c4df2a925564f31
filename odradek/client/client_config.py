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
    return _choice("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")(name, value)


def _mechanism(name, value):
    v = _str(name, value).upper()
    if v not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise ConfigError(f"{name}={value!r}: this client speaks PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512")
    return v


def _pem_only(name, value):
    if value is not None and str(value).upper() != "PEM":
        raise ConfigError(f"{name}={value!r}: this client reads PEM files only")
    return value


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
    # TLS and SASL (odradek/net/connection_security.py); kafka-python's names are synonyms.
    "ssl_ca_location": (None, _optional_str),
    "ssl_truststore_location": (None, _optional_str),
    "ssl_truststore_type": (None, _pem_only),
    "ssl_cafile": (None, _optional_str),
    "ssl_certificate_location": (None, _optional_str),
    "ssl_certfile": (None, _optional_str),
    "ssl_key_location": (None, _optional_str),
    "ssl_keyfile": (None, _optional_str),
    "ssl_keystore_location": (None, _optional_str),
    "ssl_keystore_type": (None, _pem_only),
    "ssl_key_password": (None, _optional_str),
    "ssl_password": (None, _optional_str),
    "ssl_endpoint_identification_algorithm": ("https", lambda name, value: "" if value is None else str(value)),
    "ssl_check_hostname": (None, lambda name, value: None if value is None else _bool(name, value)),
    "sasl_mechanism": ("PLAIN", _mechanism),
    "sasl_jaas_config": (None, _optional_str),
    "sasl_username": (None, _optional_str),
    "sasl_password": (None, _optional_str),
    "sasl_plain_username": (None, _optional_str),
    "sasl_plain_password": (None, _optional_str),
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
    "key_deserializer": (None, _callable_or_none),
    "value_deserializer": (None, _callable_or_none),
    "client_rack": (None, _optional_str),
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


def connection_security(config: dict):
    """The ``ConnectionSecurity`` of resolved client settings (None for PLAINTEXT)."""
    from odradek.net.connection_security import ConnectionSecurity, client_ssl_context

    protocol = config["security_protocol"].upper()
    if protocol == "PLAINTEXT":
        return None
    ssl_context = None
    check = config["ssl_check_hostname"]
    if check is None:
        check = config["ssl_endpoint_identification_algorithm"].lower() == "https"
    if protocol in ("SSL", "SASL_SSL"):
        first = lambda *names: next((config[n] for n in names if config[n]), None)  # noqa: E731
        keystore = config["ssl_keystore_location"]
        try:
            ssl_context = client_ssl_context(
                first("ssl_ca_location", "ssl_truststore_location", "ssl_cafile"),
                first("ssl_certificate_location", "ssl_certfile") or keystore,
                first("ssl_key_location", "ssl_keyfile"),
                first("ssl_key_password", "ssl_password"),
                check,
            )
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot set up TLS from the ssl.* settings: {exc}") from None
    mechanism = user = password = None
    if protocol.startswith("SASL"):
        mechanism = config["sasl_mechanism"]
        user = config["sasl_username"] or config["sasl_plain_username"]
        password = config["sasl_password"] or config["sasl_plain_password"]
        if config["sasl_jaas_config"]:
            from odradek.protocol.jaas_config import JaasError, client_credentials

            try:
                user, password = client_credentials(config["sasl_jaas_config"])
            except JaasError as exc:
                raise ConfigError(f"sasl.jaas.config: {exc}") from None
        if not user or password is None:
            raise ConfigError(
                f"security.protocol={protocol} needs sasl.username and sasl.password "
                "(or sasl.jaas.config with username=\"...\" password=\"...\")"
            )
    return ConnectionSecurity(protocol, ssl_context, check, mechanism, user, password)
