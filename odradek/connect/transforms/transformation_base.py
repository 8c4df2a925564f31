"""The SMT interfaces (Kafka's ``Transformation`` and ``Predicate``) and what the SMTs share.

A ``Transformation`` changes one record at a time: ``configure(configs)`` once (raising
``ConfigException`` naming a bad key), then ``apply(record)`` returning the new record, or None to
drop it. A ``Predicate`` decides whether a transformation applies to a record. Many SMTs come in a
``$Key`` and a ``$Value`` variant: ``KeyOrValue`` lets one class body serve both by reading and
replacing the operating schema and value. An instance belongs to one task; its schema caches are
its own.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from odradek.config_def import ConfigDef
from odradek.connect.data_schema import Schema, Struct
from odradek.connect.errors import DataException
from odradek.connect.plugin_config import parse_plugin_config
from odradek.connect.records import ConnectRecord, SinkRecord


class Transformation:
    """One single message transform. Subclasses set ``CONFIG`` (and ``REQUIRED`` keys) and
    implement ``configured(settings)`` and ``apply``."""

    CONFIG: ClassVar[dict[str, ConfigDef]] = {}
    REQUIRED: ClassVar[tuple[str, ...]] = ()

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.configured(parse_plugin_config(self.CONFIG, configs, self.REQUIRED))

    def configured(self, settings: dict[str, Any]) -> None:
        """Take the checked, typed settings."""

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        raise NotImplementedError

    def config_def(self) -> dict[str, ConfigDef]:
        return self.CONFIG

    def close(self) -> None:
        """Release what the transform holds."""


class Predicate:
    """A condition on a record, for ``transforms.<alias>.predicate``."""

    CONFIG: ClassVar[dict[str, ConfigDef]] = {}
    REQUIRED: ClassVar[tuple[str, ...]] = ()

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.configured(parse_plugin_config(self.CONFIG, configs, self.REQUIRED))

    def configured(self, settings: dict[str, Any]) -> None:
        """Take the checked, typed settings."""

    def test(self, record: ConnectRecord) -> bool:
        raise NotImplementedError

    def config_def(self) -> dict[str, ConfigDef]:
        return self.CONFIG

    def close(self) -> None:
        """Release what the predicate holds."""


class KeyOrValue:
    """Mixed into an SMT with ``$Key``/``$Value`` variants: ``ON_KEY`` says which one it is."""

    ON_KEY: ClassVar[bool] = False

    def operating_schema(self, record: ConnectRecord) -> Schema | None:
        return record.key_schema if self.ON_KEY else record.value_schema

    def operating_value(self, record: ConnectRecord) -> Any:
        return record.key if self.ON_KEY else record.value

    def new_record(self, record: ConnectRecord, schema: Schema | None, value: Any) -> ConnectRecord:
        if self.ON_KEY:
            return record.new_record(key_schema=schema, key=value)
        return record.new_record(value_schema=schema, value=value)


def key_and_value_variants(cls: type, kafka_name: str) -> dict[str, type]:
    """``{"<kafka_name>$Key": <cls>Key, "<kafka_name>$Value": <cls>Value}``: the two variants of an SMT."""
    base = cls.__name__
    key = type(base + "Key", (cls,), {"ON_KEY": True, "__doc__": f"{base} on the record key ({kafka_name}$Key)."})
    value = type(
        base + "Value", (cls,), {"ON_KEY": False, "__doc__": f"{base} on the record value ({kafka_name}$Value)."}
    )
    return {f"{kafka_name}$Key": key, f"{kafka_name}$Value": value}


def require_map(value: Any, purpose: str) -> dict:
    if not isinstance(value, dict):
        raise DataException(
            f"Only Map objects supported in absence of schema for [{purpose}], found: {_class_name(value)}"
        )
    return value


def require_struct(value: Any, purpose: str) -> Struct:
    if not isinstance(value, Struct):
        raise DataException(f"Only Struct objects supported for [{purpose}], found: {_class_name(value)}")
    return value


def require_schema(schema: Schema | None, purpose: str) -> Schema:
    if schema is None:
        raise DataException(f"Schema required for [{purpose}]")
    return schema


def require_sink_record(record: ConnectRecord, purpose: str) -> SinkRecord:
    if not isinstance(record, SinkRecord):
        raise DataException(f"Only SinkRecord supported for [{purpose}], found: {_class_name(record)}")
    return record


def _class_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


class SchemaCache:
    """Schemas an SMT derived, by the schema they came from (Kafka's SynchronizedCache of an LRUCache(16))."""

    def __init__(self, size: int = 16):
        self._size = size
        self._items: OrderedDict[Schema, Schema] = OrderedDict()

    def get_or_build(self, schema: Schema, build: Callable[[Schema], Schema]) -> Schema:
        found = self._items.get(schema)
        if found is None:
            found = build(schema)
            self._items[schema] = found
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return found


def optional_of(schema: Schema) -> Schema:
    """``schema`` made optional (same name, parameters, fields)."""
    return schema if schema.is_optional else schema.replace(optional=True)
