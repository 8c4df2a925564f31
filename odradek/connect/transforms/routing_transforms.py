"""SMTs that reroute or relabel whole records (Kafka's TimestampRouter, RegexRouter,
SetSchemaMetadata, Filter). Instances belong to one task.
"""

from __future__ import annotations

import re
from typing import Any

from odradek.config_def import INT, STR, ConfigDef, config_table
from odradek.connect.data_schema import Struct
from odradek.connect.errors import ConfigException, DataException
from odradek.connect.logical_types import millis_to_datetime
from odradek.connect.records import ConnectRecord
from odradek.connect.transforms.field_transforms import REPLACE_NULL, field_reader
from odradek.connect.transforms.java_date_format import JavaDateFormat
from odradek.connect.transforms.transformation_base import KeyOrValue, Transformation, require_schema


class TimestampRouter(Transformation):
    """Topic ``topic.format`` with ``${topic}`` and ``${timestamp}`` (the record timestamp in
    ``timestamp.format``, UTC): ``orders`` -> ``orders-20240501``."""

    CONFIG = config_table(
        ConfigDef(
            "topic.format", STR, "${topic}-${timestamp}",
            doc="Format string which can contain ${topic} and ${timestamp} as placeholders for the topic and "
            "timestamp, respectively.",
        ),
        ConfigDef(
            "timestamp.format", STR, "yyyyMMdd",
            doc="Format string for the timestamp that is compatible with java.text.SimpleDateFormat.",
        ),
    )

    def configured(self, settings: dict[str, Any]) -> None:
        self.topic_format: str = settings["topic.format"]
        try:
            self.timestamp_format = JavaDateFormat(settings["timestamp.format"])
        except ValueError as e:
            raise ConfigException("timestamp.format", settings["timestamp.format"], str(e)) from None

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if record.timestamp is None:
            raise DataException(f"Timestamp missing on record: {record}")
        stamp = self.timestamp_format.format(millis_to_datetime(record.timestamp))
        topic = self.topic_format.replace("${topic}", record.topic).replace("${timestamp}", stamp)
        return record.new_record(topic=topic)


def java_replacement(replacement: str) -> str:
    """A Java ``Matcher.replaceFirst`` replacement (``$1``, ``${name}``, ``\\$``) in ``re.Match.expand`` form."""
    out = []
    i = 0
    while i < len(replacement):
        char = replacement[i]
        if char == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1].replace("\\", "\\\\"))
            i += 2
        elif char == "$":
            named = re.match(r"\$\{(\w+)\}", replacement[i:])
            number = re.match(r"\$(\d+)", replacement[i:])
            if named:
                out.append(f"\\g<{named.group(1)}>")
                i += len(named.group(0))
            elif number:
                out.append(f"\\g<{number.group(1)}>")
                i += len(number.group(0))
            else:
                raise ValueError("Illegal group reference: a $ must be followed by a group number or ${name}")
        else:
            out.append("\\\\" if char == "\\" else char)
            i += 1
    return "".join(out)


class RegexRouter(Transformation):
    """When the whole topic matches ``regex``, the topic becomes ``replacement`` (``$1`` ... for groups)."""

    REQUIRED = ("regex", "replacement")
    CONFIG = config_table(
        ConfigDef("regex", STR, None, doc="Regular expression to use for matching."),
        ConfigDef("replacement", STR, None, doc="Replacement string."),
    )

    def configured(self, settings: dict[str, Any]) -> None:
        try:
            self.regex = re.compile(settings["regex"])
        except re.error as e:
            raise ConfigException("regex", settings["regex"], f"Invalid regex: {e}") from None
        try:
            self.replacement = java_replacement(settings["replacement"])
        except ValueError as e:
            raise ConfigException("replacement", settings["replacement"], str(e)) from None

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        match = self.regex.fullmatch(record.topic)
        if match is None:
            return record
        try:
            return record.new_record(topic=match.expand(self.replacement))
        except (re.error, IndexError) as e:
            raise DataException(f"RegexRouter replacement does not fit regex {self.regex.pattern!r}: {e}") from e


class SetSchemaMetadata(KeyOrValue, Transformation):
    """Sets the key or value schema's ``schema.name`` and/or ``schema.version``; a Struct value is
    rebuilt on the renamed schema."""

    PURPOSE = "updating schema metadata"
    CONFIG = config_table(
        ConfigDef("schema.name", STR, None, doc="Schema name to set."),
        ConfigDef("schema.version", INT, None, doc="Schema version to set."),
        REPLACE_NULL,
    )

    def configured(self, settings: dict[str, Any]) -> None:
        self.name: str | None = settings["schema.name"] or None
        self.version: int | None = settings["schema.version"]
        self.read = field_reader(settings["replace.null.with.default"])

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        schema = require_schema(self.operating_schema(record), self.PURPOSE)
        updated = schema.replace(
            name=self.name if self.name is not None else schema.name,
            version=self.version if self.version is not None else schema.version,
        )
        value = self.operating_value(record)
        if isinstance(value, Struct):
            rebuilt = Struct(updated)
            for field in updated.fields():
                rebuilt.put(field.name, self.read(value, field.name))
            value = rebuilt
        return self.new_record(record, updated, value)


class Filter(Transformation):
    """Drops every record; with a predicate (``transforms.x.predicate``) it drops those that match."""

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        return None
