"""The registry's in-memory view of ``_schemas``: the records applied in offset order, no I/O.

Every instance builds the same view from the same records, so whoever reads the topic to
its end answers as the writer would. Ids are remembered as the highest ever seen, so a
permanently deleted schema's id is not handed out again while its record is in the topic.
"""

from __future__ import annotations

import dataclasses
import logging

from . import schema_records as rec
from .schema_records import Reference, SchemaVersion

log = logging.getLogger("odradek.schema_registry")

ContentKey = tuple[str, str, tuple[Reference, ...]]


def content_key(schema_type: str, schema: str, references: tuple[Reference, ...]) -> ContentKey:
    return (schema_type, schema, tuple(references))


class RegistryState:
    def __init__(self) -> None:
        self.versions: dict[str, dict[int, SchemaVersion]] = {}
        self.holders: dict[int, set[tuple[str, int]]] = {}  # id → the (subject, version)s with it
        self.by_id: dict[int, SchemaVersion] = {}
        self.ids_by_content: dict[ContentKey, int] = {}
        self.configs: dict[str | None, str] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0

    # -- applying records ------------------------------------------------------------------

    def apply(self, key_bytes: bytes | None, value_bytes: bytes | None) -> None:
        """Apply one record of the topic; a record that is not ours is logged and skipped."""
        try:
            key = rec.decode_key(key_bytes)
            kind = key["keytype"]
            if kind == rec.SCHEMA:
                subject, version = key["subject"], int(key["version"])
                if value_bytes is None:
                    self._remove(subject, version)
                else:
                    self._put(rec.decode_schema_value(value_bytes))
            elif kind == rec.CONFIG:
                self._set(self.configs, key.get("subject"), value_bytes, "compatibilityLevel")
            elif kind == rec.MODE:
                self._set(self.modes, key.get("subject"), value_bytes, "mode")
            elif kind == rec.DELETE_SUBJECT and value_bytes is not None:
                value = rec.decode_json(value_bytes)
                self._delete_up_to(value["subject"], int(value["version"]))
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("skipping a record of the schemas topic that is not the registry's: %s", exc)

    def _put(self, sv: SchemaVersion) -> None:
        old = self.versions.get(sv.subject, {}).get(sv.version)
        if old is not None and old.id != sv.id:
            self._remove(sv.subject, sv.version)
        self.versions.setdefault(sv.subject, {})[sv.version] = sv
        self.holders.setdefault(sv.id, set()).add((sv.subject, sv.version))
        self.by_id.setdefault(sv.id, sv)
        self.ids_by_content.setdefault(content_key(sv.schema_type, sv.schema, sv.references), sv.id)
        self.max_id = max(self.max_id, sv.id)

    def _remove(self, subject: str, version: int) -> None:
        versions = self.versions.get(subject, {})
        sv = versions.pop(version, None)
        if not versions:
            self.versions.pop(subject, None)
        if sv is None:
            return
        holders = self.holders.get(sv.id, set())
        holders.discard((subject, version))
        if holders:
            return
        self.holders.pop(sv.id, None)
        gone = self.by_id.pop(sv.id, None)
        if gone is not None:
            self.ids_by_content.pop(content_key(gone.schema_type, gone.schema, gone.references), None)

    def _delete_up_to(self, subject: str, version: int) -> None:
        for v, sv in list(self.versions.get(subject, {}).items()):
            if v <= version and not sv.deleted:
                self.versions[subject][v] = dataclasses.replace(sv, deleted=True)

    @staticmethod
    def _set(table: dict, subject, value_bytes: bytes | None, field: str) -> None:
        if value_bytes is None:
            table.pop(subject, None)
        else:
            table[subject] = str(rec.decode_json(value_bytes)[field]).upper()

    # -- reading ---------------------------------------------------------------------------

    def subject_versions(self, subject: str, deleted: bool = False) -> list[SchemaVersion]:
        """The subject's versions in order (soft-deleted ones too when ``deleted``)."""
        return [
            sv for _, sv in sorted(self.versions.get(subject, {}).items()) if deleted or not sv.deleted
        ]

    def subjects(self, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.versions if self.subject_versions(s, deleted))

    def subjects_of_id(self, schema_id: int, deleted: bool = False) -> list[tuple[str, int]]:
        return sorted(
            (s, v)
            for s, v in self.holders.get(schema_id, ())
            if deleted or not self.versions[s][v].deleted
        )

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the live schemas whose references name this version."""
        ids = set()
        for versions in self.versions.values():
            for sv in versions.values():
                if not sv.deleted and any(r.subject == subject and r.version == version for r in sv.references):
                    ids.add(sv.id)
        return sorted(ids)

    def next_version(self, subject: str) -> int:
        return max(self.versions.get(subject, ()), default=0) + 1
