"""DescribeConfigs entries: every config of a topic or a broker, with its source and synonyms.

Kafka's ``ConfigHelper``: each entry carries the value in force (None for a password), where
it comes from (``ConfigSource``: an override, this broker's or the cluster's dynamic config,
``server.properties``, the default), whether it is read-only, its type and documentation, and
the synonyms in Kafka's order (the same setting under other names or at other levels: the
topic override, then dynamic, static and default broker keys). CreateTopics (v5+) answers
with the topic entries too.

Stateless functions over a ``BrokerConfig``; safe from any thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from odradek.broker.broker_keys import BROKER_CONFIGS, BROKER_SYNONYMS, looks_secret
from odradek.broker.config import BrokerConfig
from odradek.broker.dynamic_config import DYNAMIC_BROKER_CONFIGS
from odradek.broker.topic_configs import topic_default
from odradek.config_def import ConfigSource, ConfigType, parse_value, render_value
from odradek.storage.log_config import TOPIC_CONFIGS

__all__ = [
    "ConfigEntry",
    "ConfigSynonym",
    "broker_config_entries",
    "default_broker_config_entries",
    "topic_config_entries",
]


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One DescribeConfigs entry; ``source`` is a ``ConfigSource``, ``type`` a ``ConfigType``."""

    name: str
    value: str | None
    source: int
    is_sensitive: bool
    read_only: bool
    synonyms: list[ConfigSynonym] = field(default_factory=list)
    type: int = ConfigType.UNKNOWN
    documentation: str | None = None


def _broker_value(cfg: BrokerConfig, name: str) -> tuple[str | None, int]:
    d = BROKER_CONFIGS[name]
    source = cfg.source(name)
    value = None if d.sensitive else render_value(d, cfg.get(name))
    return value, source


def _broker_synonyms(cfg: BrokerConfig, keys: Iterable[str]) -> list[ConfigSynonym]:
    keys = tuple(keys)
    out = _dynamic_synonyms(cfg, keys)
    static = cfg.static
    for key in keys:
        d = BROKER_CONFIGS[key]
        if static.is_set(key):
            value = None if d.sensitive else render_value(d, static.get(key))
            out.append(ConfigSynonym(key, value, ConfigSource.STATIC_BROKER_CONFIG))
        elif d.default is not None:
            out.append(
                ConfigSynonym(
                    key, None if d.sensitive else render_value(d, d.default), ConfigSource.DEFAULT_CONFIG
                )
            )
    return out


def topic_config_entries(
    topic_overrides: Mapping[str, str], broker_config: BrokerConfig | None
) -> list[ConfigEntry]:
    """Every topic-level config of a topic, for DescribeConfigs and CreateTopics (v5+), by name.

    Source: DYNAMIC_TOPIC_CONFIG for an override, STATIC_BROKER_CONFIG when a broker synonym
    is set in server.properties, DEFAULT_CONFIG otherwise. Synonyms (Kafka's order): the
    override, then the broker synonyms that are set, then those with a default.
    """
    entries = []
    for name in sorted(TOPIC_CONFIGS):
        d = TOPIC_CONFIGS[name]
        synonyms: list[ConfigSynonym] = []
        override = topic_overrides.get(name)
        if override is not None:
            synonyms.append(ConfigSynonym(name, override, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        if broker_config is not None:
            synonyms.extend(_broker_synonyms(broker_config, (k for k, _ in d.synonyms)))
        if override is not None:
            value, source = override, ConfigSource.DYNAMIC_TOPIC_CONFIG
        else:
            value, source = topic_default(d, broker_config)
        entries.append(
            ConfigEntry(name, value, int(source), False, False, synonyms, int(d.type), d.documentation)
        )
    return entries


def broker_config_entries(broker_config: BrokerConfig) -> list[ConfigEntry]:
    """Every broker config, for DescribeConfigs on a broker resource. Read-only unless
    dynamically updatable (``DYNAMIC_BROKER_CONFIGS``); the source says which level set it.

    Passwords are sensitive and their value is None. Synonyms list the keys of the same
    setting in other units (log.retention.ms/minutes/hours, ...) that are set or defaulted.
    """
    entries = []
    for name in sorted(BROKER_CONFIGS):
        d = BROKER_CONFIGS[name]
        value, source = _broker_value(broker_config, name)
        synonyms = _broker_synonyms(broker_config, BROKER_SYNONYMS.get(name, (name,)))
        # As Kafka: higher-precedence synonyms set before this key's own entries are left out.
        while synonyms and synonyms[0].name != name:
            synonyms.pop(0)
        read_only = name not in DYNAMIC_BROKER_CONFIGS
        entries.append(
            ConfigEntry(name, value, int(source), d.sensitive, read_only, synonyms, int(d.type), d.documentation)
        )
    for name in sorted(broker_config.extra):
        secret = looks_secret(name)
        value = None if secret else broker_config.extra[name]
        entries.append(
            ConfigEntry(
                name,
                value,
                int(ConfigSource.STATIC_BROKER_CONFIG),
                secret,
                True,
                [ConfigSynonym(name, value, int(ConfigSource.STATIC_BROKER_CONFIG))],
                int(ConfigType.PASSWORD if secret else ConfigType.STRING),
                None,
            )
        )
    return entries


def _dynamic_synonyms(cfg: BrokerConfig, keys: tuple[str, ...]) -> list[ConfigSynonym]:
    """Synonyms set dynamically: this broker's first, then the cluster default's (Kafka's order)."""
    out = []
    for source in (ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG):
        layer = cfg.dynamic_layer(source)
        for key in keys:
            if key in layer:
                d = BROKER_CONFIGS[key]
                value = None if d.sensitive else render_value(d, parse_value(d, layer[key]))
                out.append(ConfigSynonym(key, value, int(source)))
    return out


def default_broker_config_entries(broker_config: BrokerConfig) -> list[ConfigEntry]:
    """DescribeConfigs of the cluster-wide default resource (an empty broker name): only the
    keys set at that level, as Kafka answers, each with its DYNAMIC_DEFAULT_BROKER_CONFIG synonyms."""
    source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    layer = broker_config.dynamic_layer(source)
    entries = []
    for name in sorted(layer):
        d = BROKER_CONFIGS[name]
        value = None if d.sensitive else render_value(d, parse_value(d, layer[name]))
        synonyms = [
            s
            for s in _dynamic_synonyms(broker_config, BROKER_SYNONYMS.get(name, (name,)))
            if s.source == source
        ]
        entries.append(
            ConfigEntry(name, value, int(source), d.sensitive, False, synonyms, int(d.type), d.documentation)
        )
    return entries
