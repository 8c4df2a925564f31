"""Config definitions: the machinery behind every table of Kafka config keys.

A key is a ``ConfigDef``: its name, ``ConfigType``, typed default (None: unset), an optional
validator, its documentation, a note (Kafka-only keys that Odradek accepts without effect) and,
for a topic-level key, the broker keys that supply its default. ``parse_value`` turns what a
file or a client gives (strings, or Python values) into the typed, checked value and raises
``ConfigError`` naming the key and what was expected; ``render_value`` writes a value back as
Kafka shows it in DescribeConfigs. This is Kafka's ``ConfigDef``; the tables live with their
owners: topic keys in ``odradek.storage.log_config`` (Kafka's ``LogConfig``), broker keys in
``odradek.broker.broker_keys`` (Kafka's ``KafkaConfig``).

A table is a dict built by ``config_table`` from one ``ConfigDef`` per line, so adding a key
is adding a line. Validators are small named checks (``AtLeast``, ``Between``, ``OneOf``,
...); one that raises ``InvalidValue(expected)`` completes the message "<key>: expected ...".

Immutable definitions and stateless functions; safe from any thread.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from odradek.protocol.errors import InvalidConfigError

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
SHORT_MIN, SHORT_MAX = -(1 << 15), (1 << 15) - 1
DOUBLE_MAX = 1.7976931348623157e308

HOUR_MS = 3_600_000
MINUTE_MS = 60_000


class ConfigType(IntEnum):
    """DescribeConfigs ``config_type`` (v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigs ``config_source`` (Kafka's ``DescribeConfigsResponse.ConfigSource``)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class ConfigError(InvalidConfigError, ValueError):
    """An unknown key or an invalid value; ``key`` names it, ``problems`` lists every one found.

    An ``InvalidConfigError`` (INVALID_CONFIG), so handlers can answer with its code.
    """

    def __init__(self, message: str, key: str | None = None, problems: list[tuple[str, str]] | None = None):
        super().__init__(message)
        self.key = key
        self.problems = problems if problems is not None else [(key or "", message)]

    def __str__(self) -> str:
        return self.message


# -- validators ------------------------------------------------------------------------------


class InvalidValue(Exception):
    """Raised by parsing and validators; ``expected`` completes "<key>: expected ..."."""

    def __init__(self, expected: str):
        self.expected = expected


class Validator:
    """A check of a typed value; returns the value (perhaps normalised) or raises InvalidValue.

    ``description`` completes "expected <type> ..."; a validator whose description says
    everything (``whole = True``: "one of a, b") is shown without the type."""

    description = ""
    whole = False

    def __call__(self, value: Any) -> Any:
        return value


class AtLeast(Validator):
    def __init__(self, low: float):
        self.low = low
        self.description = f">= {low}"

    def __call__(self, value):
        if value is not None and value < self.low:
            raise InvalidValue(self.description)
        return value


class Between(Validator):
    def __init__(self, low: float, high: float):
        self.low, self.high = low, high
        self.description = f"between {low} and {high}"

    def __call__(self, value):
        if value is not None and not self.low <= value <= self.high:
            raise InvalidValue(self.description)
        return value


class Either(Validator):
    """Accepts ``value`` if it equals ``exact`` or passes ``other`` (gzip's -1 or 1..9)."""

    def __init__(self, exact: Any, other: Validator):
        self.exact, self.other = exact, other
        self.description = f"{other.description}, or {exact}"

    def __call__(self, value):
        if value == self.exact:
            return value
        try:
            return self.other(value)
        except InvalidValue:
            raise InvalidValue(self.description) from None


class OneOf(Validator):
    """A string among ``choices``; matched case-insensitively and returned in canonical case."""

    whole = True

    def __init__(self, *choices: str):
        self.choices = choices
        self._lower = {c.lower(): c for c in choices}
        self.description = "one of " + ", ".join(choices)

    def __call__(self, value):
        if value is None:
            return value
        canonical = self._lower.get(value.lower())
        if canonical is None:
            raise InvalidValue(self.description)
        return canonical


class ListOf(Validator):
    """A list whose items are among ``choices`` (canonical case); ``allow_empty`` or not."""

    whole = True

    def __init__(self, *choices: str, allow_empty: bool = False):
        self.item = OneOf(*choices)
        self.allow_empty = allow_empty
        self.description = "a comma-separated list of " + ", ".join(choices)

    def __call__(self, value):
        if value is None:
            return value
        if not value and not self.allow_empty:
            raise InvalidValue(self.description)
        try:
            return list(dict.fromkeys(self.item(v) for v in value))
        except InvalidValue:
            raise InvalidValue(self.description) from None


class NonEmptyUnique(Validator):
    description = "a non-empty comma-separated list without duplicates"
    whole = True

    def __call__(self, value):
        if value is None:
            return value
        if not value or len(set(value)) != len(value):
            raise InvalidValue(self.description)
        return value


# -- definitions -----------------------------------------------------------------------------

ACTIVE = ""
INFORMATIONAL = "informational"  # validated and reported, no effect in Odradek
KRAFT = "kraft"  # accepted and ignored with a warning
DEPRECATED = "deprecated"  # accepted; Kafka deprecated or removed it
# In the documentation of every INFORMATIONAL and KRAFT key (the CLI marks such keys by it).
NO_EFFECT = "no effect in Odradek"


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One config key: its type, default (already typed; None = unset), validator and doc.

    ``synonyms`` (topic configs only) lists the broker keys that supply the default, in
    precedence order, each with the factor that turns its unit into the topic key's.
    """

    name: str
    type: ConfigType
    default: Any = None
    validator: Validator | None = None
    doc: str = ""
    note: str = ACTIVE
    synonyms: tuple[tuple[str, int], ...] = ()

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    @property
    def documentation(self) -> str:
        if self.note == INFORMATIONAL:
            return f"{self.doc} (Accepted for compatibility; {NO_EFFECT}.)"
        if self.note == KRAFT:
            return f"{self.doc} (KRaft only; accepted, {NO_EFFECT}.)"
        if self.note == DEPRECATED:
            return f"{self.doc} (Deprecated in Kafka.)"
        return self.doc


BOOL, STR, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.SHORT,
    ConfigType.LONG,
    ConfigType.DOUBLE,
    ConfigType.LIST,
    ConfigType.CLASS,
    ConfigType.PASSWORD,
)


def config_table(*defs: ConfigDef) -> dict[str, ConfigDef]:
    """A table of keys by name, in the order given; a name given twice is a bug."""
    out: dict[str, ConfigDef] = {}
    for d in defs:
        assert d.name not in out, d.name
        out[d.name] = d
    return out


# -- values ------------------------------------------------------------------------------

_INT_RE = re.compile(r"[+-]?\d+")
_BOUNDS = {
    ConfigType.INT: (INT_MIN, INT_MAX),
    ConfigType.LONG: (LONG_MIN, LONG_MAX),
    ConfigType.SHORT: (SHORT_MIN, SHORT_MAX),
}


def _type_expectation(t: ConfigType) -> str:
    if t in _BOUNDS:
        return "an integer"
    if t is ConfigType.DOUBLE:
        return "a number"
    if t is ConfigType.BOOLEAN:
        return "true or false"
    if t is ConfigType.LIST:
        return "a comma-separated list"
    if t is ConfigType.CLASS:
        return "a class name"
    return "a string"


def _expectation(d: ConfigDef) -> str:
    v = d.validator
    if v is None:
        return _type_expectation(d.type)
    if v.whole:
        return v.description
    return f"{_type_expectation(d.type)} {v.description}"


def parse_value(d: ConfigDef, raw: Any) -> Any:
    """Turn a raw value (string from a file, or a Python value) into the typed, checked value."""
    t = d.type
    if raw is None:
        return d.default
    value: Any  # of the definition's type
    try:
        if t in _BOUNDS:
            if isinstance(raw, bool):
                raise InvalidValue(_expectation(d))
            if isinstance(raw, int):
                value = raw
            elif isinstance(raw, str):
                text = raw.strip()
                if not text and d.default is None:
                    return None
                if not _INT_RE.fullmatch(text):
                    raise InvalidValue(_expectation(d))
                value = int(text)
            else:
                raise InvalidValue(_expectation(d))
            low, high = _BOUNDS[t]
            if not low <= value <= high:
                raise InvalidValue(f"an integer between {low} and {high}")
        elif t is ConfigType.DOUBLE:
            if isinstance(raw, bool):
                raise InvalidValue(_expectation(d))
            if isinstance(raw, (int, float)):
                value = float(raw)
            elif isinstance(raw, str):
                text = raw.strip()
                if not text and d.default is None:
                    return None
                if "_" in text:
                    raise InvalidValue(_expectation(d))
                try:
                    value = float(text)
                except ValueError:
                    raise InvalidValue(_expectation(d)) from None
            else:
                raise InvalidValue(_expectation(d))
        elif t is ConfigType.BOOLEAN:
            if isinstance(raw, bool):
                value = raw
            elif isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
                value = raw.strip().lower() == "true"
            elif isinstance(raw, str) and not raw.strip() and d.default is None:
                return None
            else:
                raise InvalidValue("true or false")
        elif t is ConfigType.LIST:
            if isinstance(raw, str):
                value = [item.strip() for item in raw.split(",") if item.strip()]
            elif isinstance(raw, (list, tuple)):
                value = [str(item).strip() for item in raw if str(item).strip()]
            else:
                raise InvalidValue(_expectation(d))
        else:
            if not isinstance(raw, str):
                raise InvalidValue(_expectation(d))
            value = raw.strip()
            if t is ConfigType.CLASS and not value:
                return None
        if d.validator is not None:
            value = d.validator(value)
    except InvalidValue as bad:
        expected = bad.expected
        if d.validator is not None and expected == d.validator.description:
            expected = _expectation(d)
        shown = "<hidden>" if d.sensitive else repr(raw)
        raise ConfigError(f"{d.name}: expected {expected}, got {shown}", d.name) from None
    return value


def render_value(d: ConfigDef, value: Any) -> str | None:
    """A typed value as Kafka shows it in DescribeConfigs."""
    if value is None:
        return None
    if d.type is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if d.type is ConfigType.LIST:
        return ",".join(value)
    if d.type is ConfigType.DOUBLE:
        return _render_double(value)
    return str(value)


def _render_double(value: float) -> str:
    if math.isnan(value) or math.isinf(value):
        return {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[repr(value)]
    text = repr(float(value))
    if "e" in text:
        mantissa, exponent = text.split("e")
        if "." not in mantissa:
            mantissa += ".0"
        return f"{mantissa}E{int(exponent)}"
    return text


def suggest(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.8)
    return f"; did you mean {close[0]!r}?" if close else ""

