"""Predicates (Kafka's ``org.apache.kafka.connect.transforms.predicates``): TopicNameMatches,
HasHeaderKey, RecordIsTombstone. Stateless after ``configure``."""

from __future__ import annotations

import re
from typing import Any

from odradek.config_def import STR, ConfigDef, config_table
from odradek.connect.errors import ConfigException
from odradek.connect.records import ConnectRecord
from odradek.connect.transforms.transformation_base import Predicate


class TopicNameMatches(Predicate):
    """True when the whole topic name matches ``pattern``."""

    REQUIRED = ("pattern",)
    CONFIG = config_table(
        ConfigDef("pattern", STR, None, doc="A Java regular expression for matching against the name of a record's topic."),
    )

    def configured(self, settings: dict[str, Any]) -> None:
        try:
            self.pattern = re.compile(settings["pattern"])
        except re.error as e:
            raise ConfigException("pattern", settings["pattern"], f"entry must be a valid regex: {e}") from None

    def test(self, record: ConnectRecord) -> bool:
        return record.topic is not None and self.pattern.fullmatch(record.topic) is not None


class HasHeaderKey(Predicate):
    """True when the record has at least one header called ``name``."""

    REQUIRED = ("name",)
    CONFIG = config_table(ConfigDef("name", STR, None, doc="The header name."))

    def configured(self, settings: dict[str, Any]) -> None:
        self.name: str = settings["name"]

    def test(self, record: ConnectRecord) -> bool:
        return record.headers.last_with_name(self.name) is not None


class RecordIsTombstone(Predicate):
    """True when the record's value is null (a tombstone)."""

    def test(self, record: ConnectRecord) -> bool:
        return record.value is None
