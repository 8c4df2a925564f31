"""Protobuf schemas: ``.proto`` text (parsed by proto-schema-parser) or, as confluent-kafka's
ProtobufSerializer registers them, a base64-encoded ``FileDescriptorProto`` (read by
protobuf). Both become one model for the compatibility check: the package and, per message
(full name), its fields by number with kind, type, label and oneof.

Imports: each must be a well-known file (``google/protobuf/``, ``google/type/``,
``confluent/``: the client and the registry know them) or the ``name`` of one of the
schema's ``references``, as Confluent's registry requires; named types are resolved through
the referenced files too (``Money`` in package ``shop`` becomes ``shop.Money``).

The stored text is the schema as given without surrounding whitespace (a descriptor's
base64 is kept as is, so clients that asked for it get it back); ``normalized`` is the
model itself as sorted JSON.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field

from antlr4.error.ErrorListener import ErrorListener
from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

SCALARS = frozenset({
    "double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
    "fixed32", "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes",
})  # fmt: skip
_DESCRIPTOR_SCALARS = {
    1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32", 8: "bool",
    9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64", 17: "sint32", 18: "sint64",
}  # fmt: skip


class ProtobufParseError(ValueError):
    pass


class _RaiseOnSyntaxError(ErrorListener):
    """The ANTLR parser reports errors and recovers; a registry must refuse the schema instead."""

    def syntaxError(self, recognizer, offendingSymbol, line, column, msg, e):  # noqa: N802, N803
        raise ProtobufParseError(f"line {line}:{column}: {msg}")


def _strict(recognizer) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_RaiseOnSyntaxError())


@dataclass(frozen=True)
class ProtoField:
    name: str
    type: str  # a scalar, "map<k,v>", or a message/enum name (full when it resolves)
    label: str  # "optional", "repeated" or "required"
    oneof: str | None = None


@dataclass
class ProtobufSchema:
    text: str
    package: str = ""
    messages: dict[str, dict[int, ProtoField]] = field(default_factory=dict)
    enums: dict[str, list[str]] = field(default_factory=dict)
    imports: tuple[str, ...] = ()

    schema_type = "PROTOBUF"

    def canonical(self) -> str:
        return self.text.strip()

    def normalized(self) -> str:
        model = {
            "package": self.package,
            "messages": {m: {str(n): vars(f) for n, f in fs.items()} for m, fs in self.messages.items()},
            "enums": self.enums,
        }
        return json.dumps(model, sort_keys=True, separators=(",", ":"))


def parse(text: str, references: list[str] | None = None) -> ProtobufSchema:
    """Parse ``text`` (.proto or base64 descriptor); ``references`` are the texts of the files it
    imports, dependencies first. ProtobufParseError says what is wrong."""
    schema = _parse_file(text)
    imported: set[str] = set()
    for ref_text in references or ():
        try:
            ref = _parse_file(ref_text)
        except ProtobufParseError:
            continue  # a reference of another type: its names are not Protobuf's
        imported |= set(ref.messages) | set(ref.enums)
    _resolve_names(schema, imported)
    return schema


def well_known(import_name: str) -> bool:
    """Files every Protobuf client knows without a reference (as Confluent's clients skip them)."""
    return import_name.startswith(("google/protobuf/", "google/type/", "confluent/"))


def unresolved_imports(schema: ProtobufSchema, reference_names: set[str]) -> list[str]:
    return [i for i in schema.imports if not well_known(i) and i not in reference_names]


def _parse_file(text: str) -> ProtobufSchema:
    descriptor = _as_descriptor(text)
    schema = ProtobufSchema(text)
    if descriptor is not None:
        _from_descriptor(descriptor, schema)
    else:
        try:
            parsed = Parser(setup_lexer=_strict, setup_parser=_strict).parse(text)
        except ProtobufParseError as exc:
            raise ProtobufParseError(f"not a .proto schema: {exc}") from None
        _from_ast(parsed, schema)
    if not schema.messages and not schema.enums:
        raise ProtobufParseError("the schema defines no message and no enum")
    return schema


def is_descriptor(text: str) -> bool:
    """Whether the text is a base64 FileDescriptorProto (as confluent-kafka registers them)."""
    return _as_descriptor(text) is not None


def _as_descriptor(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    stripped = text.strip()
    if not stripped or any(c.isspace() for c in stripped) or "{" in stripped:
        return None
    try:
        raw = base64.b64decode(stripped, validate=True)
        descriptor = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, ValueError, DecodeError):
        return None
    return descriptor if descriptor.message_type or descriptor.enum_type else None


def _from_descriptor(fd: descriptor_pb2.FileDescriptorProto, schema: ProtobufSchema) -> None:
    schema.package = fd.package
    schema.imports = tuple(fd.dependency)

    def message(m, prefix: str) -> None:
        full = f"{prefix}.{m.name}" if prefix else m.name
        entries = {f"{full}.{n.name}": n for n in m.nested_type if n.options.map_entry}
        fields = {}
        for f in m.field:
            label = {2: "required", 3: "repeated"}.get(f.label, "optional")
            name = f.type_name.lstrip(".")
            if name in entries:
                key, value = entries[name].field
                kind, label = f"map<{_descriptor_type(key)},{_descriptor_type(value)}>", "optional"
            else:
                kind = _descriptor_type(f)
            oneof = m.oneof_decl[f.oneof_index].name if f.HasField("oneof_index") and not f.proto3_optional else None
            fields[f.number] = ProtoField(f.name, kind, label, oneof)
        schema.messages[full] = fields
        for nested in m.nested_type:
            if not nested.options.map_entry:
                message(nested, full)
        for e in m.enum_type:
            schema.enums[f"{full}.{e.name}"] = [v.name for v in e.value]

    for m in fd.message_type:
        message(m, fd.package)
    for e in fd.enum_type:
        schema.enums[f"{fd.package}.{e.name}" if fd.package else e.name] = [v.name for v in e.value]


def _descriptor_type(f) -> str:
    return _DESCRIPTOR_SCALARS.get(f.type) or f.type_name.lstrip(".")


def _from_ast(parsed: ast.File, schema: ProtobufSchema) -> None:
    package = next((e.name for e in parsed.file_elements if isinstance(e, ast.Package)), "")
    schema.package = package
    schema.imports = tuple(e.name for e in parsed.file_elements if isinstance(e, ast.Import))

    def message(m: ast.Message, prefix: str) -> None:
        full = f"{prefix}.{m.name}" if prefix else m.name
        fields: dict[int, ProtoField] = {}

        def add(f, oneof: str | None) -> None:
            if isinstance(f, ast.MapField):
                fields[f.number] = ProtoField(f.name, f"map<{f.key_type},{f.value_type}>", "optional", oneof)
            elif isinstance(f, ast.Field):
                card = (f.cardinality.value.lower() if f.cardinality else "optional")
                fields[f.number] = ProtoField(f.name, f.type, card, oneof)

        for el in m.elements:
            if isinstance(el, ast.OneOf):
                for f in el.elements:
                    add(f, el.name)
            elif isinstance(el, ast.Message):
                message(el, full)
            elif isinstance(el, ast.Enum):
                schema.enums[f"{full}.{el.name}"] = [v.name for v in el.elements if isinstance(v, ast.EnumValue)]
            else:
                add(el, None)
        schema.messages[full] = fields

    for el in parsed.file_elements:
        if isinstance(el, ast.Message):
            message(el, package)
        elif isinstance(el, ast.Enum):
            name = f"{package}.{el.name}" if package else el.name
            schema.enums[name] = [v.name for v in el.elements if isinstance(v, ast.EnumValue)]


def _resolve_names(schema: ProtobufSchema, imported: set[str]) -> None:
    """Named field types as full names, looked up from the innermost scope out (as protoc does),
    among this file's types and those of the files it imports."""
    known = set(schema.messages) | set(schema.enums) | imported
    for message, fields in schema.messages.items():
        scopes = message.split(".")
        for number, f in list(fields.items()):
            if f.type in SCALARS or f.type.startswith("map<") or f.type in known:
                continue
            name = f.type.lstrip(".")
            for depth in range(len(scopes), -1, -1):
                candidate = ".".join([*scopes[:depth], name])
                if candidate in known:
                    fields[number] = ProtoField(f.name, candidate, f.label, f.oneof)
                    break
