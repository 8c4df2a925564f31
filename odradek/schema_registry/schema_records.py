"""The records of the ``_schemas`` topic in the JSON formats Confluent's registry writes.

Keys (compacted on, so their bytes are stable: fixed field order, no spaces)::

    {"keytype":"SCHEMA","subject":"s","version":1,"magic":1}
    {"keytype":"CONFIG","subject":"s","magic":0}        subject null: the global config
    {"keytype":"MODE","subject":"s","magic":0}          subject null: the global mode
    {"keytype":"DELETE_SUBJECT","subject":"s","magic":0}
    {"keytype":"NOOP","magic":0}

Values: a SCHEMA value is ``{"subject","version","id","schemaType","schema","references",
"deleted"}`` (``schemaType`` left out for AVRO, ``references`` when empty); CONFIG
``{"compatibilityLevel": ...}``; MODE ``{"mode": ...}``; DELETE_SUBJECT ``{"subject",
"version"}`` (every version up to it is deleted). A null value (tombstone) removes the key:
a permanently deleted version, or a config or mode set back to the default.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

SCHEMA = "SCHEMA"
CONFIG = "CONFIG"
MODE = "MODE"
DELETE_SUBJECT = "DELETE_SUBJECT"
CLEAR_SUBJECT = "CLEAR_SUBJECT"
NOOP = "NOOP"


@dataclass(frozen=True)
class Reference:
    """A named type another subject's version defines (``{"name","subject","version"}``)."""

    name: str
    subject: str
    version: int

    def as_json(self) -> dict:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class SchemaVersion:
    """One version of a subject, as a SCHEMA record holds it."""

    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = field(default=())
    deleted: bool = False

    def as_json(self) -> dict:
        out: dict = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [r.as_json() for r in self.references]
        out["schema"] = self.schema
        out["deleted"] = self.deleted
        return out


def _dump(obj: dict) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dump({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def config_key(subject: str | None) -> bytes:
    return _dump({"keytype": CONFIG, "subject": subject, "magic": 0})


def mode_key(subject: str | None) -> bytes:
    return _dump({"keytype": MODE, "subject": subject, "magic": 0})


def delete_subject_key(subject: str) -> bytes:
    return _dump({"keytype": DELETE_SUBJECT, "subject": subject, "magic": 0})


def noop_key() -> bytes:
    return _dump({"keytype": NOOP, "magic": 0})


def schema_value(version: SchemaVersion) -> bytes:
    return _dump(version.as_json())


def config_value(level: str) -> bytes:
    return _dump({"compatibilityLevel": level})


def mode_value(mode: str) -> bytes:
    return _dump({"mode": mode})


def delete_subject_value(subject: str, version: int) -> bytes:
    return _dump({"subject": subject, "version": version})


def parse_references(items) -> tuple[Reference, ...]:
    """``[{"name","subject","version"}]`` as References; ValueError naming what is wrong."""
    if items is None:
        return ()
    if not isinstance(items, list):
        raise ValueError("references must be a list")
    out = []
    for item in items:
        if not isinstance(item, dict):
            raise ValueError(f"a reference must be an object, got {item!r}")
        name, subject, version = item.get("name"), item.get("subject"), item.get("version")
        if not isinstance(name, str) or not isinstance(subject, str) or not name or not subject:
            raise ValueError(f"a reference needs a name and a subject, got {item!r}")
        if isinstance(version, bool) or not isinstance(version, int):
            raise ValueError(f"a reference needs an integer version, got {item!r}")
        out.append(Reference(name, subject, version))
    return tuple(out)


def decode_key(raw: bytes | None) -> dict:
    """The key as a dict with at least ``keytype``; ValueError if it is not one of ours."""
    if raw is None:
        raise ValueError("a record without a key")
    key = json.loads(raw)
    if not isinstance(key, dict) or not isinstance(key.get("keytype"), str):
        raise ValueError(f"not a registry key: {raw[:100]!r}")
    return key


def decode_schema_value(raw: bytes) -> SchemaVersion:
    v = json.loads(raw)
    return SchemaVersion(
        subject=v["subject"],
        version=int(v["version"]),
        id=int(v["id"]),
        schema_type=v.get("schemaType") or "AVRO",
        schema=v["schema"],
        references=parse_references(v.get("references")),
        deleted=bool(v.get("deleted", False)),
    )


def decode_json(raw: bytes) -> dict:
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError(f"not a JSON object: {raw[:100]!r}")
    return value
