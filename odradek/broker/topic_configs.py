"""Topic configs as the broker applies them: overrides checked, defaults from broker keys.

The keys, types, checks and broker synonyms are storage's table
(``odradek.storage.log_config.TOPIC_CONFIGS``). Here the broker adds what needs its own
configuration: a topic key without an override takes the value of its first broker synonym
that is set (``retention.ms`` ← ``log.retention.ms`` / ``minutes`` / ``hours``, a negative
retention meaning -1), else the table's default (``topic_default``); CreateTopics and
AlterConfigs check overrides with ``validate_topic_configs`` (plus Odradek's rules:
``compression.type=none`` means ``uncompressed``, tiered storage is refused, min and max
compaction lags are checked against each other with the broker's defaults); the log manager
builds each log's ``LogConfig`` from ``effective_topic_config``.

Stateless functions; safe from any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from odradek.broker.broker_keys import BROKER_CONFIGS
from odradek.broker.config import BrokerConfig
from odradek.config_def import ConfigDef, ConfigError, ConfigSource, parse_value, render_value, suggest
from odradek.storage.log_config import NO_OP_TOPIC_CONFIGS, TOPIC_CONFIGS

__all__ = ["effective_topic_config", "topic_default", "validate_topic_configs"]


def topic_default(d: ConfigDef, cfg: BrokerConfig | None) -> tuple[str | None, int]:
    """The value a topic gets without an override, and where it comes from."""
    if cfg is None or not d.synonyms:
        return render_value(d, d.default), ConfigSource.DEFAULT_CONFIG
    for key, factor in d.synonyms:
        value = cfg.get(key)
        if value is None:
            continue
        if factor != 1:
            value *= factor
        if d.name == "retention.ms" and value < 0:
            value = -1
        return render_value(d, value), cfg.source(key)
    return render_value(d, d.default), ConfigSource.DEFAULT_CONFIG


def validate_topic_configs(
    configs: Mapping[str, Any], broker_config: BrokerConfig | None = None
) -> dict[str, str]:
    """Check topic overrides (CreateTopics, AlterConfigs); return them normalised as strings.

    Raises ``ConfigError`` (INVALID_CONFIG) naming the first bad key. ``compression.type=none``
    is taken as ``uncompressed``. With ``broker_config`` the cross-key checks also see the
    broker's defaults.
    """
    out: dict[str, str] = {}
    for key, raw in configs.items():
        d = TOPIC_CONFIGS.get(key)
        if d is None:
            hint = suggest(key, TOPIC_CONFIGS)
            if not hint and key in BROKER_CONFIGS:
                hint = "; that is a broker config"
            raise ConfigError(f"{key}: unknown topic config{hint}", key)
        if raw is None:
            raise ConfigError(f"{key}: a value is required", key)
        if key == "compression.type" and isinstance(raw, str) and raw.strip().lower() == "none":
            raw = "uncompressed"
        value = parse_value(d, raw)
        if key == "remote.storage.enable" and value:
            raise ConfigError("remote.storage.enable: tiered storage is not supported by Odradek", key)
        out[key] = render_value(d, value)  # type: ignore[assignment]
    _check_compaction_lags(out, broker_config)
    return out


def _check_compaction_lags(overrides: Mapping[str, str], broker_config: BrokerConfig | None) -> None:
    def effective(name: str) -> int:
        if name in overrides:
            return int(overrides[name])
        value, _ = topic_default(TOPIC_CONFIGS[name], broker_config)
        return int(value)  # type: ignore[arg-type]

    if "min.compaction.lag.ms" in overrides or "max.compaction.lag.ms" in overrides:
        low, high = effective("min.compaction.lag.ms"), effective("max.compaction.lag.ms")
        if low > high:
            key = "min.compaction.lag.ms" if "min.compaction.lag.ms" in overrides else "max.compaction.lag.ms"
            raise ConfigError(
                f"{key}: min.compaction.lag.ms ({low}) must not exceed max.compaction.lag.ms ({high})", key
            )


def effective_topic_config(
    overrides: Mapping[str, Any], broker_config: BrokerConfig | None
) -> dict[str, str]:
    """Every topic-level key with the value in force: the override, else the broker's default.

    The result feeds ``odradek.storage.log_config.LogConfig.from_dict``.
    """
    checked = validate_topic_configs(overrides, broker_config) if overrides else {}
    out: dict[str, str] = {}
    for name, d in TOPIC_CONFIGS.items():
        if name in NO_OP_TOPIC_CONFIGS:
            continue
        if name in checked:
            out[name] = checked[name]
        else:
            value, _ = topic_default(d, broker_config)
            out[name] = "" if value is None else value
    return out


