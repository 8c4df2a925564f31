"""The registry's operations over the ``_schemas`` view: the answers of the REST API as dicts.

Reads answer from the in-memory state. Writes decide under one lock, in the order the
topic records them (Confluent's single writer). A registration decides, queues its record
for the store's next batch and releases the lock, so registrations arriving together share
one produce; what they have queued but not yet applied (ids handed out, subjects with a
version on the way) is kept beside the state so the next decision counts it. Other writes
(deletes, config, mode) first wait until everything queued is applied, then decide.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections import OrderedDict

from . import compatibility, protobuf_descriptor, protobuf_schema
from . import registry_errors as err
from . import schema_records as rec
from .protobuf_schema import ProtobufSchema, unresolved_imports
from .registry_state import content_key
from .schema_records import Reference, SchemaVersion
from .schema_types import TYPES, ParsedSchema, schema_type
from .schemas_topic import SchemasTopic

MODES = ("READWRITE", "READONLY", "IMPORT")
MAX_VERSION = 2**31 - 1
PARSED_CACHE_SIZE = 1024


def parse_version(value, allow_latest: bool = True) -> int | None:
    """A version path parameter as an int (None for latest/-1); 42202 when it is neither."""
    text = str(value).strip()
    if allow_latest and text.lower() in ("latest", "-1"):
        return None
    try:
        version = int(text)
    except ValueError:
        raise err.invalid_version(value) from None
    if not 1 <= version <= MAX_VERSION:
        raise err.invalid_version(value)
    return version


def version_json(sv: SchemaVersion) -> dict:
    """A version as the API shows it: the stored value without its ``deleted`` flag."""
    out = sv.as_json()
    del out["deleted"]
    return out


@dataclasses.dataclass
class Candidate:
    """A schema in a request body, parsed against its references."""

    schema_type: str
    text: str  # the form stored and compared: canonical, or normalized when asked
    references: tuple[Reference, ...]
    parsed: ParsedSchema


class Registry:
    def __init__(self, store: SchemasTopic, default_level: str = compatibility.DEFAULT_LEVEL):
        self.store = store
        self.default_level = default_level
        self._write_lock = asyncio.Lock()
        # Registrations queued in the store and not yet applied to the state:
        self._pending_subjects: dict[str, asyncio.Future] = {}
        self._pending_ids: dict = {}  # content key → the id its queued record carries
        self._highest_id_given = 0  # never goes down, so a failed write's id is not handed out again
        self._parsed_cache: OrderedDict = OrderedDict()
        self._bodies_by_id: dict[tuple[int, str | None], tuple[SchemaVersion, bytes]] = {}

    @property
    def state(self):
        return self.store.state

    # -- schemas by id ---------------------------------------------------------------------

    def _by_id(self, schema_id: int) -> SchemaVersion:
        sv = self.state.by_id.get(schema_id)
        if sv is None:
            raise err.schema_not_found(f"Schema {schema_id} not found")
        return sv

    def schema_by_id_body(self, schema_id: int, fmt: str | None = None) -> bytes:
        """``schema_by_id`` encoded as the response body, kept per id and format: the hot path
        of every deserializer that meets a new id. An entry is used while the id still maps
        to the same stored version (the state replaces that object when the record changes)."""
        key = (schema_id, "serialized" if fmt == "serialized" else None)  # other formats: as stored
        cached = self._bodies_by_id.get(key)
        sv = self.state.by_id.get(schema_id)
        if cached is not None and cached[0] is sv:
            return cached[1]
        self._bodies_by_id.pop(key, None)
        body = json.dumps(self.schema_by_id(schema_id, key[1])).encode()
        self._bodies_by_id[key] = (self._by_id(schema_id), body)
        return body

    def schema_by_id(self, schema_id: int, fmt: str | None = None) -> dict:
        sv = self._by_id(schema_id)
        shown = version_json(sv)
        shown["schema"] = self.schema_text(sv, fmt)
        return {k: v for k, v in shown.items() if k in ("schemaType", "references", "schema")}

    def schema_text(self, sv: SchemaVersion, fmt: str | None) -> str:
        """The schema as stored, or with ``format=serialized`` a Protobuf schema as the base64
        FileDescriptorProto Confluent's Protobuf clients read (other types: as stored)."""
        if fmt != "serialized" or sv.schema_type != "PROTOBUF" or protobuf_schema.is_descriptor(sv.schema):
            return sv.schema
        imported: dict[str, str] = {}
        for _, text in self._referenced(sv.references, set()):
            try:
                ref = protobuf_schema.parse(text)
            except ValueError:
                continue
            imported |= {m: "message" for m in ref.messages} | {e: "enum" for e in ref.enums}
        return protobuf_descriptor.serialized(sv.schema, imported)

    def id_versions(self, schema_id: int, deleted: bool = False) -> list[dict]:
        self._by_id(schema_id)
        return [{"subject": s, "version": v} for s, v in self.state.subjects_of_id(schema_id, deleted)]

    def id_subjects(self, schema_id: int, deleted: bool = False) -> list[str]:
        self._by_id(schema_id)
        return sorted({s for s, _ in self.state.subjects_of_id(schema_id, deleted)})

    @staticmethod
    def types() -> list[str]:
        return sorted(TYPES)

    # -- subjects and versions -------------------------------------------------------------

    def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        return [s for s in self.state.subjects(deleted) if s.startswith(prefix)]

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        found = self.state.subject_versions(subject, deleted)
        if not found:
            raise err.subject_not_found(subject)
        return [sv.version for sv in found]

    def version(self, subject: str, version, deleted: bool = False) -> SchemaVersion:
        """The version (``latest``: the newest not deleted); 40401/40402/42202 as Confluent."""
        wanted = parse_version(version)
        every = self.state.subject_versions(subject, deleted=True)
        if not every:
            raise err.subject_not_found(subject)
        if wanted is None:
            live = [sv for sv in every if deleted or not sv.deleted]
            if not live:
                raise err.subject_not_found(subject)
            return live[-1]
        for sv in every:
            if sv.version == wanted and (deleted or not sv.deleted):
                return sv
        raise err.version_not_found(version)

    def referenced_by(self, subject: str, version) -> list[int]:
        sv = self.version(subject, version)
        return self.state.referenced_by(sv.subject, sv.version)

    # -- parsing request bodies -------------------------------------------------------------

    def _referenced(self, references: tuple[Reference, ...], seen: set) -> list[tuple[str, str]]:
        """(name, text) of the referenced schemas, each after its own references (dependencies first)."""
        found: list[tuple[str, str]] = []
        for ref in references:
            if (ref.subject, ref.version) in seen:
                continue
            seen.add((ref.subject, ref.version))
            sv = self.state.versions.get(ref.subject, {}).get(ref.version)
            if sv is None:
                raise err.invalid_schema(
                    f"the reference {ref.name!r} names subject {ref.subject!r} version {ref.version}, "
                    "which does not exist; register it first"
                )
            found += self._referenced(sv.references, seen)
            found.append((ref.name, sv.schema))
        return found

    def candidate(self, body, normalize: bool = False) -> Candidate:
        """The schema of a register/lookup/compatibility body; 42201 when it cannot be used."""
        if not isinstance(body, dict):
            raise err.unprocessable("the request body must be a JSON object with a \"schema\" field")
        text = body.get("schema")
        if not isinstance(text, str) or not text.strip():
            raise err.invalid_schema("the body has no \"schema\" string")
        kind = schema_type(body.get("schemaType")) if isinstance(body.get("schemaType"), str | None) else None
        if kind is None:
            raise err.invalid_schema(
                f"schemaType {body.get('schemaType')!r} is not served; the types are {', '.join(sorted(TYPES))}"
            )
        try:
            references = rec.parse_references(body.get("references"))
        except ValueError as exc:
            raise err.invalid_schema(str(exc)) from None
        referenced = self._referenced(references, set())
        try:
            parsed = self._parse(kind.name, text, referenced)
        except ValueError as exc:
            raise err.invalid_schema(str(exc)) from None
        except RecursionError:
            raise err.invalid_schema("the schema is nested too deeply to parse") from None
        if isinstance(parsed, ProtobufSchema):
            missing = unresolved_imports(parsed, {ref.name for ref in references})
            if missing:
                raise err.invalid_schema(
                    f"the schema imports {', '.join(missing)}, which is neither a well-known file nor the name "
                    "of one of its references; register it and name it in references [{name, subject, version}]"
                )
        stored = parsed.normalized() if normalize else parsed.canonical()
        return Candidate(kind.name, stored, references, parsed)

    def _parse(self, schema_type: str, text: str, referenced: list[tuple[str, str]]) -> ParsedSchema:
        """A schema parsed with its references' texts, remembered for the next request that
        brings the same text (a client re-registering, a compatibility check of old versions)."""
        key = (schema_type, text, tuple(referenced))
        parsed = self._parsed_cache.get(key)
        if parsed is None:
            parsed = TYPES[schema_type].parse(text, referenced)
            self._parsed_cache[key] = parsed
            if len(self._parsed_cache) > PARSED_CACHE_SIZE:
                self._parsed_cache.popitem(last=False)
        else:
            self._parsed_cache.move_to_end(key)
        return parsed

    def _parsed(self, sv: SchemaVersion):
        return self._parse(sv.schema_type, sv.schema, self._referenced(sv.references, set()))

    def _same(self, sv: SchemaVersion, cand: Candidate, normalize: bool) -> bool:
        if sv.schema_type != cand.schema_type or sv.references != cand.references:
            return False
        if sv.schema == cand.text:
            return True
        return normalize and self._parsed(sv).normalized() == cand.text

    def lookup(self, subject: str, body, normalize: bool = False, deleted: bool = False) -> dict:
        cand = self.candidate(body, normalize)
        found = self.state.subject_versions(subject, deleted)
        if not found:
            raise err.subject_not_found(subject)
        for sv in reversed(found):
            if self._same(sv, cand, normalize):
                return version_json(sv)
        raise err.schema_not_found("Schema not found")

    # -- compatibility ----------------------------------------------------------------------

    def level(self, subject: str | None) -> str:
        configs = self.state.configs
        return configs.get(subject) or configs.get(None) or self.default_level

    def _reasons(self, subject: str, previous: list[SchemaVersion], cand: Candidate, level: str) -> list[str]:
        same_type = [sv for sv in previous if sv.schema_type == cand.schema_type]
        if len(same_type) != len(previous) and level != "NONE":
            return [f"the subject's earlier versions are not {cand.schema_type} schemas"]
        reads = TYPES[cand.schema_type].reads
        return compatibility.check(reads, [self._parsed(sv) for sv in same_type], cand.parsed, level)

    def check_compatibility(self, subject: str, version, body, verbose: bool = False) -> dict:
        cand = self.candidate(body)  # the parsed schema is what is checked; its stored form does not matter
        level = self.level(subject)
        if version is None:  # /compatibility/subjects/{s}/versions: what registering would check
            previous = self.state.subject_versions(subject)
        elif parse_version(version) is None:  # latest: the level picks the latest or all
            previous = self.state.subject_versions(subject)
            if not previous:
                raise err.subject_not_found(subject)
        else:
            previous = [self.version(subject, version)]
        reasons = self._reasons(subject, previous, cand, level)
        out: dict = {"is_compatible": not reasons}
        if verbose:
            out["messages"] = reasons
        return out

    # -- writes ----------------------------------------------------------------------------

    def mode(self, subject: str | None) -> str:
        modes = self.state.modes
        return modes.get(subject) or modes.get(None) or "READWRITE"

    def _check_writable(self, subject: str | None) -> None:
        if self.mode(subject) == "READONLY":
            where = f"Subject {subject}" if subject and subject in self.state.modes else "The registry"
            raise err.operation_not_permitted(f"{where} is in read-only mode")

    @contextlib.asynccontextmanager
    async def _deciding_alone(self):
        """The write lock, once every queued registration has been applied: a delete or a
        config change decides against the state with nothing on the way."""
        async with self._write_lock:
            await self.store.settled()
            yield

    async def register(self, subject: str, body, normalize: bool = False) -> dict:
        while True:
            async with self._write_lock:
                before = self._pending_subjects.get(subject)
                if before is None:
                    decided = await self._decide_registration(subject, body, normalize)
                    if isinstance(decided, dict):
                        return decided
                    break
            await asyncio.wait([before])  # the subject's previous version first: decide after it
        written, key, schema_id = decided
        try:
            await asyncio.shield(written)  # shared by the batch: a cancelled caller leaves it be
        finally:
            if self._pending_subjects.get(subject) is written:
                del self._pending_subjects[subject]
            if self._pending_ids.get(key) == schema_id:
                del self._pending_ids[key]
        return {"id": schema_id}

    async def _decide_registration(self, subject: str, body, normalize: bool):
        """Under the lock: the id of an existing version ({"id": n}), or the queued write,
        its content key and the new id."""
        self._check_writable(subject)
        mode = self.mode(subject)
        cand = self.candidate(body, normalize)
        given_id = body.get("id") if isinstance(body, dict) else None
        given_version = body.get("version") if isinstance(body, dict) else None
        if given_id is not None and mode != "IMPORT":
            raise err.operation_not_permitted(
                f"Subject {subject} is not in import mode: a schema with a given id needs mode IMPORT"
            )
        if given_id is not None:
            await self.store.settled()  # a given id is checked against everything written
        live = self.state.subject_versions(subject)
        for sv in reversed(live):
            if self._same(sv, cand, normalize) and given_id in (None, sv.id):
                return {"id": sv.id}
        if mode != "IMPORT":
            reasons = self._reasons(subject, live, cand, self.level(subject))
            if reasons:
                raise err.incompatible(
                    f"Schema being registered is incompatible with an earlier schema for subject "
                    f"\"{subject}\", details: {reasons}"
                )
        key = content_key(cand.schema_type, cand.text, cand.references)
        schema_id = self._assign_id(key, cand, given_id)
        version = self._assign_version(subject, given_version, mode)
        sv = SchemaVersion(subject, version, schema_id, cand.schema_type, cand.text, cand.references)
        written = self.store.enqueue(rec.schema_key(subject, version), rec.schema_value(sv))
        self._pending_subjects[subject] = written
        self._pending_ids.setdefault(key, schema_id)
        self._highest_id_given = max(self._highest_id_given, schema_id)
        return written, key, schema_id

    def _assign_id(self, key, cand: Candidate, given_id) -> int:
        if given_id is None:
            existing = self.state.ids_by_content.get(key) or self._pending_ids.get(key)
            if existing is not None:
                return existing
            return max(self.state.max_id, self._highest_id_given) + 1
        if isinstance(given_id, bool) or not isinstance(given_id, int) or given_id < 1:
            raise err.unprocessable(f"id must be a positive integer, got {given_id!r}")
        holder = self.state.by_id.get(given_id)
        if holder is not None and (holder.schema_type, holder.schema, holder.references) != (
            cand.schema_type, cand.text, cand.references
        ):
            raise err.operation_not_permitted(
                f"Overwrite new schema with id {given_id} is not permitted: the id holds another schema"
            )
        return given_id

    def _assign_version(self, subject: str, given_version, mode: str) -> int:
        if given_version is None or mode != "IMPORT":
            return self.state.next_version(subject)
        version = parse_version(given_version, allow_latest=False)
        assert version is not None
        if version in self.state.versions.get(subject, {}):
            raise err.operation_not_permitted(f"Subject {subject} already has a version {version}")
        return version

    def _refuse_if_referenced(self, sv: SchemaVersion) -> None:
        if self.state.referenced_by(sv.subject, sv.version):
            raise err.reference_exists(
                f"One or more references exist to the schema {{magic=1,keytype=SCHEMA,subject={sv.subject},"
                f"version={sv.version}}}: delete the schemas referencing it first"
            )

    async def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        async with self._deciding_alone():
            self._check_writable(subject)
            every = self.state.subject_versions(subject, deleted=True)
            if not every:
                raise err.subject_not_found(subject)
            live = [sv for sv in every if not sv.deleted]
            for sv in every:
                self._refuse_if_referenced(sv)
            if not permanent:
                if not live:
                    raise err.subject_soft_deleted(subject)
                await self.store.write(
                    rec.delete_subject_key(subject), rec.delete_subject_value(subject, every[-1].version)
                )
                return [sv.version for sv in live]
            if live:
                raise err.subject_not_soft_deleted(subject)
            for sv in every:
                await self.store.write(rec.schema_key(subject, sv.version), None)
            for key, table in ((rec.config_key(subject), self.state.configs), (rec.mode_key(subject), self.state.modes)):
                if subject in table:
                    await self.store.write(key, None)
            return [sv.version for sv in every]

    async def delete_version(self, subject: str, version, permanent: bool = False) -> int:
        async with self._deciding_alone():
            self._check_writable(subject)
            wanted = parse_version(version)
            if wanted is None:
                sv = self.version(subject, version)
            else:
                if not self.state.versions.get(subject):
                    raise err.subject_not_found(subject)
                found = self.state.versions[subject].get(wanted)
                if found is None:
                    raise err.version_not_found(version)
                sv = found
            self._refuse_if_referenced(sv)
            if not permanent:
                if sv.deleted:
                    raise err.version_soft_deleted(subject, sv.version)
                value = rec.schema_value(dataclasses.replace(sv, deleted=True))
                await self.store.write(rec.schema_key(subject, sv.version), value)
            else:
                if not sv.deleted:
                    raise err.version_not_soft_deleted(subject, sv.version)
                await self.store.write(rec.schema_key(subject, sv.version), None)
            return sv.version

    # -- configs and modes --------------------------------------------------------------------

    @staticmethod
    def _setting(table: dict, subject: str | None, default_to_global: bool, global_value: str, missing):
        """A subject's own setting; the global one for no subject or with defaultToGlobal."""
        value = table.get(subject) if subject is not None else global_value
        if value is None:
            if not default_to_global:
                raise missing(subject)
            value = global_value
        return value

    def get_config(self, subject: str | None, default_to_global: bool = False) -> dict:
        level = self._setting(
            self.state.configs, subject, default_to_global, self.level(None), err.subject_config_not_found
        )
        return {"compatibilityLevel": level}

    async def set_config(self, subject: str | None, body) -> dict:
        value = body.get("compatibility") if isinstance(body, dict) else None
        level = compatibility.parse_level(value)
        if level is None:
            raise err.invalid_compatibility_level(value)
        async with self._deciding_alone():
            self._check_writable(subject)
            await self.store.write(rec.config_key(subject), rec.config_value(level))
        return {"compatibility": level}

    async def delete_config(self, subject: str | None) -> dict:
        async with self._deciding_alone():
            if subject is not None and not self.state.versions.get(subject):
                raise err.subject_not_found(subject)
            previous = self.level(subject)
            if subject in self.state.configs:
                await self.store.write(rec.config_key(subject), None)
            return {"compatibilityLevel": previous}

    def get_mode(self, subject: str | None, default_to_global: bool = False) -> dict:
        mode = self._setting(self.state.modes, subject, default_to_global, self.mode(None), err.subject_mode_not_found)
        return {"mode": mode}

    async def set_mode(self, subject: str | None, body, force: bool = False) -> dict:
        value = body.get("mode") if isinstance(body, dict) else None
        mode = value.strip().upper() if isinstance(value, str) else None
        if mode not in MODES:
            raise err.invalid_mode(value)
        async with self._deciding_alone():
            if mode == "IMPORT" and not force:
                has = self.state.subject_versions(subject) if subject else self.state.subjects()
                if has:
                    raise err.operation_not_permitted(
                        "Cannot import since found existing subjects; set force=true to switch anyway"
                    )
            await self.store.write(rec.mode_key(subject), rec.mode_value(mode))
        return {"mode": mode}

    async def delete_mode(self, subject: str) -> dict:
        async with self._deciding_alone():
            if not self.state.versions.get(subject) and subject not in self.state.modes:
                raise err.subject_not_found(subject)
            previous = self.mode(subject)
            if subject in self.state.modes:
                await self.store.write(rec.mode_key(subject), None)
            return {"mode": previous}
