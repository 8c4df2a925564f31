"""A connector's declared configuration: Kafka Connect's ``ConfigDef``, ``ConfigValue`` and ``Config``.

A connector lists its keys with ``ConfigDef().define(name, type, default, validator, importance,
doc, group, ...)``; ``parse`` turns a connector config (strings, as the REST API and property
files give them) into typed values or raises ``ConfigException`` naming the first bad key;
``validate`` reports every key's value and errors as ``ConfigValue``s — what the REST validate
endpoint shows, per key. Types and checks reuse ``odradek.config_def`` (the broker's machinery):
``type`` is a ``ConfigType`` or Kafka's name for it ("STRING", "INT", "LIST", ...), ``validator``
one of its validators (``AtLeast``, ``OneOf``, ...) or any callable that raises ``ValueError``.

Immutable once built; safe from any thread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from odradek.config_def import ConfigDef as KeyDef
from odradek.config_def import ConfigError, ConfigType, InvalidValue, Validator, parse_value, render_value
from odradek.connect.errors import ConfigException

NO_DEFAULT: Any = object()  # Kafka's NO_DEFAULT_VALUE: the key is required


class Importance:
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


class Width:
    NONE = "NONE"
    SHORT = "SHORT"
    MEDIUM = "MEDIUM"
    LONG = "LONG"


@dataclasses.dataclass(frozen=True)
class ConfigKey:
    """One declared key; ``key_def`` is the broker machinery's definition that parses it."""

    name: str
    type: ConfigType
    default: Any
    validator: Validator | Callable[[Any], Any] | None
    importance: str
    doc: str
    group: str | None
    order: int
    width: str
    display_name: str
    dependents: tuple[str, ...]

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT

    @property
    def key_def(self) -> KeyDef:
        validator = self.validator if isinstance(self.validator, Validator) else None
        default = None if self.required else self.default
        return KeyDef(self.name, self.type, default, validator, self.doc)

    def parse(self, raw: Any) -> Any:
        """The typed value of ``raw`` (None or missing: the default); ConfigException when bad."""
        if raw is None and self.required:
            raise ConfigException(
                self.name, message=f'Missing required configuration "{self.name}" which has no default value.'
            )
        try:
            value = parse_value(self.key_def, raw)
        except ConfigError as bad:
            raise ConfigException(self.name, raw, str(bad).split(": ", 1)[-1]) from None
        if self.validator is not None and not isinstance(self.validator, Validator):
            try:
                result = self.validator(value)
            except (InvalidValue, ValueError) as bad:
                text = bad.expected if isinstance(bad, InvalidValue) else str(bad)
                raise ConfigException(self.name, raw, text) from None
            if result is not None:
                value = result
        return value

    def default_text(self) -> str | None:
        if self.required or self.default is None:
            return None
        return render_value(self.key_def, self.default)

    def definition(self) -> dict:
        """As Kafka's REST API shows a key's definition (``ConfigKeyInfo``)."""
        return {
            "name": self.name,
            "type": self.type.name,
            "required": self.required,
            "default_value": self.default_text(),
            "importance": self.importance,
            "documentation": self.doc,
            "group": self.group,
            "width": self.width,
            "display_name": self.display_name,
            "dependents": list(self.dependents),
            "order": self.order,
        }


@dataclasses.dataclass
class ConfigValue:
    """A key's value and what is wrong with it (Kafka's ``ConfigValue``)."""

    name: str
    value: Any = None
    recommended_values: list = dataclasses.field(default_factory=list)
    errors: list[str] = dataclasses.field(default_factory=list)
    visible: bool = True

    def add_error(self, message: str) -> None:
        self.errors.append(message)

    def info(self, shown: str | None) -> dict:
        """As Kafka's REST API shows it (``ConfigValueInfo``), ``shown`` being the value as text."""
        return {
            "name": self.name,
            "value": shown,
            "recommended_values": [str(v) for v in self.recommended_values],
            "errors": list(self.errors),
            "visible": self.visible,
        }


@dataclasses.dataclass
class Config:
    """What ``Connector.validate`` returns: one ``ConfigValue`` per key."""

    config_values: list[ConfigValue]


def _config_type(type_: ConfigType | str) -> ConfigType:
    if isinstance(type_, ConfigType):
        return type_
    try:
        return ConfigType[type_.upper()]
    except KeyError:
        raise ValueError(f"unknown config type {type_!r}; one of {', '.join(t.name for t in ConfigType)}") from None


class ConfigDef:
    """Keys in the order defined; ``define`` returns the ConfigDef so definitions chain."""

    def __init__(self, keys: Iterable[ConfigKey] = ()):
        self.keys: dict[str, ConfigKey] = {k.name: k for k in keys}

    def define(
        self,
        name: str,
        type: ConfigType | str,
        default: Any = NO_DEFAULT,
        validator: Validator | Callable[[Any], Any] | None = None,
        importance: str = Importance.MEDIUM,
        doc: str = "",
        group: str | None = None,
        order: int = -1,
        width: str = Width.NONE,
        display_name: str | None = None,
        dependents: Iterable[str] = (),
    ) -> ConfigDef:
        if name in self.keys:
            raise ValueError(f"configuration {name!r} is defined twice")
        kind = _config_type(type)
        key = ConfigKey(name, kind, default, validator, importance, doc, group, order, width, display_name or name,
                        tuple(dependents))
        if not key.required and key.default is not None:
            key = dataclasses.replace(key, default=key.parse(default))
        self.keys[name] = key
        return self

    def merge(self, other: ConfigDef) -> ConfigDef:
        """A new ConfigDef with this one's keys, then the other's that this one lacks."""
        merged = ConfigDef(self.keys.values())
        for name, key in other.keys.items():
            merged.keys.setdefault(name, key)
        return merged

    def names(self) -> list[str]:
        return list(self.keys)

    def groups(self) -> list[str]:
        return list(dict.fromkeys(k.group for k in self.keys.values() if k.group))

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Typed values of every defined key (defaults filled in); raises on the first bad one."""
        return {name: key.parse(props.get(name)) for name, key in self.keys.items()}

    def validate(self, props: Mapping[str, Any]) -> list[ConfigValue]:
        """One ConfigValue per defined key, each with its errors (none when the value is good)."""
        out = []
        for name, key in self.keys.items():
            value = ConfigValue(name, props.get(name))
            try:
                value.value = key.parse(props.get(name))
            except ConfigException as bad:
                value.add_error((bad.message or str(bad)) if props.get(name) is None else str(bad))
            out.append(value)
        return out
