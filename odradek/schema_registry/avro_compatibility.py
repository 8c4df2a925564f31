"""Avro's schema resolution as a pure check: can a reader schema read what a writer wrote?

The rules are the Avro specification's ("Schema Resolution"), which Confluent applies for
every compatibility level: promotions int→long/float/double, long→float/double,
float→double, string↔bytes; records matched by name (or a reader alias), reader fields
missing in the writer need a default; enum symbols the writer may write must exist in the
reader unless the reader has a default; fixed sizes equal; unions branch by branch.
Each violation is returned as a reason naming its kind and path.
"""

from __future__ import annotations

from .avro_schema import PRIMITIVES, AvroSchema

PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}
COMPLEX = frozenset({"record", "error", "enum", "fixed", "array", "map"})


def reader_reads_writer(reader: AvroSchema, writer: AvroSchema) -> list[str]:
    """Every reason why data written with ``writer`` cannot be read with ``reader`` ([] if it can)."""
    return _Check(reader.named, writer.named).check(reader.parsed, writer.parsed, "")


class _Check:
    def __init__(self, reader_named: dict, writer_named: dict):
        self.reader_named = reader_named
        self.writer_named = writer_named
        self.in_progress: set[tuple[str, str]] = set()

    def _resolve(self, node, named: dict):
        if isinstance(node, str) and node not in PRIMITIVES:
            return named.get(node, node)
        if isinstance(node, dict) and node.get("type") in PRIMITIVES:
            return node["type"]
        if isinstance(node, dict) and isinstance(node.get("type"), str) and node["type"] not in COMPLEX:
            return self._resolve(node["type"], named)
        return node

    @staticmethod
    def _kind(node) -> str:
        if isinstance(node, list):
            return "union"
        if isinstance(node, dict):
            return str(node.get("type"))
        return str(node)

    def check(self, reader, writer, path: str) -> list[str]:
        reader = self._resolve(reader, self.reader_named)
        writer = self._resolve(writer, self.writer_named)
        rk, wk = self._kind(reader), self._kind(writer)
        if wk == "union":
            reasons = []
            for i, branch in enumerate(writer):
                reasons += self.check(reader, branch, f"{path}/{i}")
            return reasons
        if rk == "union":
            for branch in reader:
                if not self.check(branch, writer, path):
                    return []
            return [f"MISSING_UNION_BRANCH at {path or '/'}: the reader's union has no branch for the writer's {wk}"]
        if rk == wk or (rk, wk) in (("record", "error"), ("error", "record")):
            if rk in PRIMITIVES:
                return []
            return getattr(self, f"_{'record' if rk == 'error' else rk}")(reader, writer, path)
        if rk in PROMOTIONS.get(wk, ()):
            return []
        return [f"TYPE_MISMATCH at {path or '/'}: the reader's type {rk} cannot read the writer's {wk}"]

    @staticmethod
    def _short(name: str) -> str:
        return name.rpartition(".")[2]

    def _names_match(self, reader: dict, writer: dict, path: str) -> list[str]:
        rname, wname = reader.get("name", ""), writer.get("name", "")
        aliases = {self._short(a) for a in reader.get("aliases", ()) or ()} | set(reader.get("aliases", ()) or ())
        if self._short(rname) == self._short(wname) or wname in aliases or self._short(wname) in aliases:
            return []
        return [f"NAME_MISMATCH at {path or '/'}: the reader's name {rname} differs from the writer's {wname}"]

    def _record(self, reader: dict, writer: dict, path: str) -> list[str]:
        reasons = self._names_match(reader, writer, path)
        if reasons:
            return reasons
        pair = (reader.get("name", ""), writer.get("name", ""))
        if pair in self.in_progress:
            return []  # a recursive type: assume what is being checked further up
        self.in_progress.add(pair)
        try:
            writer_fields = {f["name"]: f for f in writer.get("fields", ())}
            for i, field in enumerate(reader.get("fields", ())):
                names = [field["name"], *(field.get("aliases") or ())]
                match = next((writer_fields[n] for n in names if n in writer_fields), None)
                where = f"{path}/fields/{i}"
                if match is None:
                    if "default" not in field:
                        reasons.append(
                            f"READER_FIELD_MISSING_DEFAULT_VALUE at {where}: the reader's field "
                            f"'{field['name']}' has no default value and is missing in the writer's schema"
                        )
                    continue
                reasons += self.check(field["type"], match["type"], f"{where}/type")
            return reasons
        finally:
            self.in_progress.discard(pair)

    def _enum(self, reader: dict, writer: dict, path: str) -> list[str]:
        reasons = self._names_match(reader, writer, path)
        if reasons or "default" in reader:
            return reasons
        missing = [s for s in writer.get("symbols", ()) if s not in set(reader.get("symbols", ()))]
        if missing:
            reasons.append(
                f"MISSING_ENUM_SYMBOLS at {path}/symbols: the reader's enum {reader.get('name')} "
                f"lacks the writer's {', '.join(missing)} and has no default"
            )
        return reasons

    def _fixed(self, reader: dict, writer: dict, path: str) -> list[str]:
        reasons = self._names_match(reader, writer, path)
        if not reasons and reader.get("size") != writer.get("size"):
            reasons.append(
                f"FIXED_SIZE_MISMATCH at {path}/size: the reader's size {reader.get('size')} "
                f"differs from the writer's {writer.get('size')}"
            )
        return reasons

    def _array(self, reader: dict, writer: dict, path: str) -> list[str]:
        return self.check(reader.get("items"), writer.get("items"), f"{path}/items")

    def _map(self, reader: dict, writer: dict, path: str) -> list[str]:
        return self.check(reader.get("values"), writer.get("values"), f"{path}/values")
