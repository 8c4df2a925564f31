"""Confluent's JSON Schema compatibility rules as a pure check: does every document valid under
the writer's schema stay valid under the reader's?

Following Confluent's registry: a reader may widen what it accepts (a type extended, e.g.
integer → number; a bound removed or relaxed; an enum extended; a required property
dropped; an optional property added to a closed content model) but not narrow it (a type
changed or narrowed; a bound added or tightened; a pattern added or changed; an enum
narrowed; a property made required without a default; additionalProperties closed or
narrowed; a property added to an open content model, since old documents may hold it with
any value; a property removed from a closed one). Each violation is one reason naming its
kind and path.
"""

from __future__ import annotations

import referencing.exceptions

from .json_schema import JsonSchema

NUMERIC = {"integer", "number"}
TYPES = ("null", "boolean", "object", "array", "number", "integer", "string")
# (keyword, larger is stricter): lower bounds tighten upwards, upper bounds downwards.
BOUNDS = {
    "minimum": True, "exclusiveMinimum": True, "minLength": True, "minItems": True, "minProperties": True,
    "maximum": False, "exclusiveMaximum": False, "maxLength": False, "maxItems": False, "maxProperties": False,
}  # fmt: skip


def reader_reads_writer(reader: JsonSchema, writer: JsonSchema) -> list[str]:
    return _Check(reader, writer).check(reader.parsed, writer.parsed, "")


def _types(schema: dict) -> set[str]:
    kind = schema.get("type")
    if kind is None:
        return set(TYPES)
    return {kind} if isinstance(kind, str) else set(kind)


class _Check:
    def __init__(self, reader: JsonSchema, writer: JsonSchema):
        self.roots = {"reader": reader.parsed, "writer": writer.parsed}
        self.resolvers = {"reader": reader.resolver, "writer": writer.resolver}
        self.seen: set[tuple[int, int]] = set()

    def _deref(self, schema, side: str):
        """Follow ``$ref``s with the side's current resolver: local pointers into the document
        being read, other documents through the schema's references (by the reference's name).
        Following one makes its document current for what lies below (``check`` restores the
        resolvers on its way out). A ``$ref`` left unresolved is compared by value."""
        for _ in range(32):  # a chain of refs ends; a cycle is cut here
            if not isinstance(schema, dict) or not isinstance(schema.get("$ref"), str):
                return schema
            ref = schema["$ref"]
            resolver = self.resolvers[side]
            if resolver is None:  # not parsed with references: local pointers into the root only
                node = self._local(ref, side) if ref.startswith("#") else None
            else:
                try:
                    resolved = resolver.lookup(ref)
                except referencing.exceptions.Unresolvable:
                    return schema
                node, self.resolvers[side] = resolved.contents, resolved.resolver
            if node is None:
                return schema
            schema = node
        return schema

    def _local(self, ref: str, side: str):
        node = self.roots[side]
        for part in [p for p in ref[1:].split("/") if p]:
            node = node.get(part.replace("~1", "/").replace("~0", "~")) if isinstance(node, dict) else None
        return node

    def check(self, reader, writer, path: str) -> list[str]:
        outer = dict(self.resolvers)
        try:
            return self._check(self._deref(reader, "reader"), self._deref(writer, "writer"), path)
        finally:
            self.resolvers = outer

    def _check(self, reader, writer, path: str) -> list[str]:
        where = path or "/"
        if reader is True or reader == {}:
            return []
        if writer is False:
            return []
        if reader is False:
            return [f"TYPE_NARROWED at {where}: the reader accepts nothing"]
        if writer is True:
            writer = {}
        if not isinstance(reader, dict) or not isinstance(writer, dict):
            return []
        key = (id(reader), id(writer))
        if key in self.seen:
            return []
        self.seen.add(key)
        if "$ref" in reader or "$ref" in writer:
            if reader.get("$ref") != writer.get("$ref"):
                return [f"TYPE_CHANGED at {where}: $ref {writer.get('$ref')} became {reader.get('$ref')}"]
            return []
        for combiner in ("oneOf", "anyOf"):
            if combiner in reader or combiner in writer:
                return self._combined(reader, writer, combiner, path)
        reasons = self._type(reader, writer, where)
        if reasons:
            return reasons
        reasons += self._bounds(reader, writer, where)
        reasons += self._enum_and_pattern(reader, writer, where)
        types = _types(reader) & (_types(writer) | (NUMERIC if "integer" in _types(writer) else set()))
        if "object" in types:
            reasons += self._object(reader, writer, path)
        if "array" in types:
            reasons += self._array(reader, writer, path)
        return reasons

    def _combined(self, reader: dict, writer: dict, combiner: str, path: str) -> list[str]:
        reader_branches = reader.get(combiner, [reader])
        writer_branches = writer.get(combiner, [writer])
        reasons = []
        for i, branch in enumerate(writer_branches):
            if not any(not self.check(r, branch, f"{path}/{combiner}/{i}") for r in reader_branches):
                reasons.append(f"COMBINED_TYPE_SUBSCHEMAS_CHANGED at {path or '/'}/{combiner}/{i}: "
                               "no branch of the reader accepts this branch of the writer")  # fmt: skip
        return reasons

    @staticmethod
    def _type(reader: dict, writer: dict, where: str) -> list[str]:
        r, w = _types(reader), _types(writer)
        if "number" in r:
            r = r | {"integer"}
        missing = w - r
        if not missing:
            return []
        kind = "TYPE_NARROWED" if r & w else "TYPE_CHANGED"
        return [f"{kind} at {where}: the reader does not accept {', '.join(sorted(missing))}"]

    @staticmethod
    def _bounds(reader: dict, writer: dict, where: str) -> list[str]:
        reasons = []
        for keyword, larger_is_stricter in BOUNDS.items():
            r, w = reader.get(keyword), writer.get(keyword)
            if r is None or isinstance(r, bool):
                continue
            if w is None or isinstance(w, bool):
                reasons.append(f"{_upper(keyword)}_ADDED at {where}: the reader adds {keyword} {r}")
            elif (r > w) if larger_is_stricter else (r < w):
                change = "INCREASED" if larger_is_stricter else "DECREASED"
                reasons.append(f"{_upper(keyword)}_{change} at {where}: {keyword} {w} became {r}")
        if reader.get("uniqueItems") is True and writer.get("uniqueItems") is not True:
            reasons.append(f"UNIQUE_ITEMS_ADDED at {where}")
        r, w = reader.get("multipleOf"), writer.get("multipleOf")
        if r is not None and (w is None or w % r != 0):
            reasons.append(f"MULTIPLE_OF_{'ADDED' if w is None else 'CHANGED'} at {where}: multipleOf {w} became {r}")
        return reasons

    @staticmethod
    def _enum_and_pattern(reader: dict, writer: dict, where: str) -> list[str]:
        reasons = []
        if "enum" in reader:
            if "enum" not in writer:
                reasons.append(f"ENUM_ARRAY_NARROWED at {where}: the reader adds an enum")
            elif any(v not in reader["enum"] for v in writer["enum"]):
                reasons.append(f"ENUM_ARRAY_NARROWED at {where}: the reader's enum lacks some of the writer's values")
        if "const" in reader and reader.get("const") != writer.get("const"):
            reasons.append(f"ENUM_ARRAY_NARROWED at {where}: the reader adds or changes const")
        if "pattern" in reader and reader["pattern"] != writer.get("pattern"):
            kind = "PATTERN_ADDED" if "pattern" not in writer else "PATTERN_CHANGED"
            reasons.append(f"{kind} at {where}: pattern {writer.get('pattern')!r} became {reader['pattern']!r}")
        return reasons

    def _object(self, reader: dict, writer: dict, path: str) -> list[str]:
        where = path or "/"
        reasons = []
        r_props, w_props = reader.get("properties", {}) or {}, writer.get("properties", {}) or {}
        r_extra, w_extra = reader.get("additionalProperties", True), writer.get("additionalProperties", True)
        w_open = w_extra is not False or bool(writer.get("patternProperties"))
        for name, schema in r_props.items():
            sub = f"{path}/properties/{name}"
            if name in w_props:
                reasons += self.check(schema, w_props[name], sub)
            elif w_open:
                # Old documents may carry this name with any value the writer's
                # additionalProperties allowed.
                if w_extra is True or w_extra == {}:
                    if self.check(schema, {}, sub):
                        reasons.append(f"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL at {sub}: the writer accepted any value for '{name}'")
                else:
                    reasons += self.check(schema, w_extra, sub)
        for name, schema in w_props.items():
            if name not in r_props:
                sub = f"{path}/properties/{name}"
                if r_extra is False:
                    reasons.append(f"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL at {sub}: the reader rejects '{name}'")
                elif r_extra is not True and r_extra != {}:
                    reasons += self.check(r_extra, schema, sub)
        required_before = set(writer.get("required", ()) or ())
        for name in reader.get("required", ()) or ():
            if name not in required_before and "default" not in (r_props.get(name) or {}):
                reasons.append(f"REQUIRED_PROPERTY_ADDED at {where}: the reader requires '{name}'")
        if r_extra is False and w_extra is not False:
            reasons.append(f"ADDITIONAL_PROPERTIES_REMOVED at {where}: the reader closed the content model")
        elif isinstance(r_extra, dict) and r_extra != {} and w_extra is not False:
            reasons += self.check(r_extra, {} if w_extra is True else w_extra, f"{path}/additionalProperties")
        return reasons

    def _array(self, reader: dict, writer: dict, path: str) -> list[str]:
        r_items, w_items = reader.get("items", True), writer.get("items", True)
        if isinstance(r_items, list) or isinstance(w_items, list):
            if r_items != w_items:
                return [f"ITEMS_CHANGED at {path or '/'}: tuple items differ"]
            return []
        return self.check(r_items, w_items, f"{path}/items")


def _upper(keyword: str) -> str:
    out = "".join(f"_{c}" if c.isupper() else c for c in keyword)
    return out.upper()
