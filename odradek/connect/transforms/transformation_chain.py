"""A connector's transformation chain, built from its config as Kafka's ``ConnectorConfig`` does.

    transforms=route,mask
    transforms.route.type=org.apache.kafka.connect.transforms.RegexRouter
    transforms.route.regex=(.*)
    transforms.route.replacement=copy-$1
    transforms.route.predicate=isOrders
    transforms.route.negate=false
    predicates=isOrders
    predicates.isOrders.type=org.apache.kafka.connect.transforms.predicates.TopicNameMatches
    predicates.isOrders.pattern=orders.*

``TransformationChain.from_config(config)`` builds and configures every transformation and
predicate (raising ``ConfigException`` naming the full key of the first problem);
``validate_transforms(config)`` lists every problem as ``(key, message)`` for the REST validate
endpoint. A chain belongs to one task: ``apply`` runs the stages in order, a stage whose predicate
says no (or yes, with ``negate``) is skipped, and a stage that returns None drops the record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from odradek.connect.errors import ConfigException
from odradek.connect.records import ConnectRecord
from odradek.connect.transforms.smt_catalog import PREDICATES, TRANSFORMATIONS
from odradek.connect.transforms.transformation_base import Predicate, Transformation

Lookup = Callable[[str], type | None]


def table_lookup(table: Mapping[str, type]) -> Lookup:
    """Find a class by Kafka's full name, or by its simple name (``InsertField$Value``)."""
    by_simple = {name.rsplit(".", 1)[-1]: cls for name, cls in table.items()}

    def lookup(name: str) -> type | None:
        return table.get(name) or by_simple.get(name)

    return lookup


def _aliases(config: Mapping[str, Any], key: str) -> list[str]:
    raw = config.get(key) or ""
    aliases = [a.strip() for a in (raw.split(",") if isinstance(raw, str) else raw) if a.strip()]
    duplicates = sorted({a for a in aliases if aliases.count(a) > 1})
    if duplicates:
        raise ConfigException(key, raw, f"Duplicate alias provided: {', '.join(duplicates)}")
    return aliases


def _plugin_configs(config: Mapping[str, Any], prefix: str, reserved: tuple[str, ...]) -> dict[str, Any]:
    return {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix) and k[len(prefix):] not in reserved}


def _instantiate(config: Mapping[str, Any], prefix: str, lookup: Lookup, kind: str, reserved: tuple[str, ...]):
    type_key = prefix + "type"
    class_name = (config.get(type_key) or "").strip()
    if not class_name:
        raise ConfigException(type_key, message=f'Missing required configuration "{type_key}" which has no default value.')
    cls = lookup(class_name)
    if cls is None:
        raise ConfigException(type_key, class_name, f"Class {class_name} could not be found as a {kind}.")
    plugin = cls()
    try:
        plugin.configure(_plugin_configs(config, prefix, reserved))
    except ConfigException as e:
        raise e.renamed(prefix + e.key) from None
    return plugin


@dataclass
class Stage:
    alias: str
    transformation: Transformation
    predicate: Predicate | None = None
    negate: bool = False

    def applies_to(self, record: ConnectRecord) -> bool:
        return self.predicate is None or self.predicate.test(record) != self.negate


class TransformationChain:
    def __init__(self, stages: list[Stage]):
        self.stages = stages

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], transformations: Lookup | None = None, predicates: Lookup | None = None
    ) -> TransformationChain:
        find_transformation = transformations or table_lookup(TRANSFORMATIONS)
        find_predicate = predicates or table_lookup(PREDICATES)
        built_predicates = {
            alias: _instantiate(config, f"predicates.{alias}.", find_predicate, "predicate", ("type",))
            for alias in _aliases(config, "predicates")
        }
        stages = []
        for alias in _aliases(config, "transforms"):
            prefix = f"transforms.{alias}."
            transformation = _instantiate(
                config, prefix, find_transformation, "transformation", ("type", "predicate", "negate")
            )
            predicate_alias = (config.get(prefix + "predicate") or "").strip()
            negate_text = str(config.get(prefix + "negate", "false")).strip().lower()
            if negate_text not in ("true", "false"):
                raise ConfigException(prefix + "negate", config.get(prefix + "negate"), "expected true or false")
            negate = negate_text == "true"
            predicate = None
            if predicate_alias:
                predicate = built_predicates.get(predicate_alias)
                if predicate is None:
                    raise ConfigException(
                        prefix + "predicate", predicate_alias,
                        f"The predicate {predicate_alias} is not listed in predicates "
                        f"({', '.join(built_predicates) or 'none'})",
                    )
            elif negate:
                raise ConfigException(prefix + "negate", "true", "negate applies only to a transform with a predicate")
            stages.append(Stage(alias, transformation, predicate, negate))
        return cls(stages)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        for stage in self.stages:
            if stage.applies_to(record):
                result = stage.transformation.apply(record)
                if result is None:
                    return None
                record = result
        return record

    def close(self) -> None:
        closed: set[int] = set()
        for stage in self.stages:
            for plugin in (stage.transformation, stage.predicate):
                if plugin is not None and id(plugin) not in closed:
                    closed.add(id(plugin))
                    plugin.close()


def validate_transforms(
    config: Mapping[str, Any], transformations: Lookup | None = None, predicates: Lookup | None = None
) -> list[tuple[str, str]]:
    """Every problem with the ``transforms``/``predicates`` keys of a connector config, as
    ``(key, message)``; empty when the chain builds."""
    problems: list[tuple[str, str]] = []
    for list_key in ("transforms", "predicates"):
        try:
            _aliases(config, list_key)
        except ConfigException as e:
            problems.append((e.key, str(e)))
    if problems:
        return problems
    # Each alias alone, so one bad stage does not hide the next; a transform's predicate reference
    # is checked apart from the predicate itself (which is reported under its own keys).
    others = {k: v for k, v in config.items() if not k.startswith(("transforms", "predicates"))}
    predicate_aliases = _aliases(config, "predicates")
    for alias in predicate_aliases:
        prefix = f"predicates.{alias}."
        single = {**others, "predicates": alias, **{k: v for k, v in config.items() if k.startswith(prefix)}}
        problems.extend(_problems(single, transformations, predicates))
    for alias in _aliases(config, "transforms"):
        prefix = f"transforms.{alias}."
        own = {k: v for k, v in config.items() if k.startswith(prefix)}
        reference = {k: own.pop(k) for k in (prefix + "predicate", prefix + "negate") if k in own}
        problems.extend(_problems({**others, "transforms": alias, **own}, transformations, predicates))
        predicate_alias = (reference.get(prefix + "predicate") or "").strip()
        if predicate_alias in predicate_aliases:
            continue
        stub = {"transforms": alias, prefix + "type": "org.apache.kafka.connect.transforms.Filter", **reference}
        problems.extend(_problems(stub, transformations, predicates))
    return problems


def _problems(config: Mapping[str, Any], transformations: Lookup | None, predicates: Lookup | None) -> list[tuple[str, str]]:
    try:
        TransformationChain.from_config(config, transformations, predicates).close()
    except ConfigException as e:
        return [(e.key, str(e))]
    return []
