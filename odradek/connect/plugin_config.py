"""Typed settings for Connect plugins (converters, transforms, predicates) from their config dicts.

A plugin declares its keys as a table of ``odradek.config_def.ConfigDef`` (Kafka's ``ConfigDef``:
name, type, default, validator, doc) and reads them with ``parse_plugin_config``, which checks
every value and raises ``ConfigException`` naming the first bad key — what the REST validate
endpoint reports for it. A key without a default is required. Stateless; safe from any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from odradek.config_def import ConfigDef, ConfigError, parse_value
from odradek.connect.errors import ConfigException

# A default meaning "no default: the key must be set" (None means "optional, unset").
REQUIRED = object()


def parse_plugin_config(
    table: Mapping[str, ConfigDef], configs: Mapping[str, Any], required: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``{key: typed value}`` for every key of ``table`` (defaults filled in); ``required`` keys
    must be given and not empty. Unknown keys are ignored, as Kafka's plugins ignore them."""
    values: dict[str, Any] = {}
    for name, definition in table.items():
        raw = configs.get(name)
        if name in required and (raw is None or (isinstance(raw, str) and not raw.strip())):
            raise ConfigException(name, message=f'Missing required configuration "{name}" which has no default value.')
        try:
            values[name] = parse_value(definition, raw)
        except ConfigError as e:
            raise ConfigException(name, raw, str(e).split(": ", 1)[-1]) from None
    return values


def validate_plugin_config(
    table: Mapping[str, ConfigDef], configs: Mapping[str, Any], required: tuple[str, ...] = ()
) -> list[tuple[str, str]]:
    """Every problem with ``configs`` as ``(key, message)`` pairs (empty when all is well)."""
    problems = []
    for name in table:
        try:
            parse_plugin_config({name: table[name]}, configs, tuple(r for r in required if r == name))
        except ConfigException as e:
            problems.append((e.key, str(e)))
    return problems
