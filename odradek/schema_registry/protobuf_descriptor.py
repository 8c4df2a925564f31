"""A ``.proto`` schema as the base64 ``FileDescriptorProto`` Confluent's clients ask for
(``?format=serialized``): their ProtobufDeserializer builds its message classes from it.

The file is built from proto-schema-parser's tree: package, syntax, imports, messages
(nested ones too), enums, fields with their labels, maps (as the ``XxxEntry`` message
protoc makes), oneofs, and proto3 ``optional`` (as protoc's synthetic oneof). Named types
are written fully qualified (``.shop.Money``), looked up from the innermost scope out
among this file's types and those of the files it imports. Options are left out: they
change no byte on the wire.
"""

from __future__ import annotations

import base64

from google.protobuf import descriptor_pb2
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

F = descriptor_pb2.FieldDescriptorProto
SCALAR_TYPES = {
    "double": F.TYPE_DOUBLE, "float": F.TYPE_FLOAT, "int64": F.TYPE_INT64, "uint64": F.TYPE_UINT64,
    "int32": F.TYPE_INT32, "fixed64": F.TYPE_FIXED64, "fixed32": F.TYPE_FIXED32, "bool": F.TYPE_BOOL,
    "string": F.TYPE_STRING, "bytes": F.TYPE_BYTES, "uint32": F.TYPE_UINT32, "sfixed32": F.TYPE_SFIXED32,
    "sfixed64": F.TYPE_SFIXED64, "sint32": F.TYPE_SINT32, "sint64": F.TYPE_SINT64,
}  # fmt: skip
LABELS = {"REPEATED": F.LABEL_REPEATED, "REQUIRED": F.LABEL_REQUIRED}


def type_kinds(tree: ast.File) -> dict[str, str]:
    """Every type the file defines, by full name: "message" or "enum"."""
    package = _package(tree)
    kinds: dict[str, str] = {}

    def walk(elements, prefix: str) -> None:
        for el in elements:
            if isinstance(el, ast.Message):
                full = f"{prefix}.{el.name}" if prefix else el.name
                kinds[full] = "message"
                walk(el.elements, full)
            elif isinstance(el, ast.Enum):
                kinds[f"{prefix}.{el.name}" if prefix else el.name] = "enum"

    walk(tree.file_elements, package)
    return kinds


def parse_tree(text: str) -> ast.File:
    return Parser().parse(text)


def serialized(text: str, imported: dict[str, str]) -> str:
    """The base64 FileDescriptorProto of ``.proto`` text; ``imported`` holds the kinds of the
    types its imports define (``type_kinds`` of each)."""
    tree = parse_tree(text)
    package = _package(tree)
    kinds = {**imported, **type_kinds(tree)}
    fd = descriptor_pb2.FileDescriptorProto(name="schema.proto", package=package or None)
    fd.syntax = getattr(tree, "syntax", None) or "proto2"
    if fd.syntax == "proto2":
        fd.ClearField("syntax")  # protoc leaves proto2's syntax unset
    fd.dependency.extend(el.name for el in tree.file_elements if isinstance(el, ast.Import))
    for el in tree.file_elements:
        if isinstance(el, ast.Message):
            _message(fd.message_type.add(), el, package, kinds, fd.syntax == "proto3")
        elif isinstance(el, ast.Enum):
            _enum(fd.enum_type.add(), el)
    return base64.b64encode(fd.SerializeToString()).decode()


def _package(tree: ast.File) -> str:
    return next((e.name for e in tree.file_elements if isinstance(e, ast.Package)), "")


def _enum(out: descriptor_pb2.EnumDescriptorProto, enum: ast.Enum) -> None:
    out.name = enum.name
    for value in enum.elements:
        if isinstance(value, ast.EnumValue):
            out.value.add(name=value.name, number=value.number)


def _resolve(name: str, scope: str, kinds: dict[str, str]) -> tuple[str, str]:
    """(full name, kind) of a type named in ``scope``: innermost scope first, as protoc."""
    if name.startswith("."):
        return name[1:], kinds.get(name[1:], "message")
    parts = scope.split(".") if scope else []
    for depth in range(len(parts), -1, -1):
        candidate = ".".join([*parts[:depth], name])
        if candidate in kinds:
            return candidate, kinds[candidate]
    return name, "message"  # a type of a well-known file (google.protobuf.Timestamp) is a message


def _set_type(field: descriptor_pb2.FieldDescriptorProto, type_name: str, scope: str, kinds: dict[str, str]) -> None:
    if type_name in SCALAR_TYPES:
        field.type = SCALAR_TYPES[type_name]
        return
    full, kind = _resolve(type_name, scope, kinds)
    field.type = F.TYPE_ENUM if kind == "enum" else F.TYPE_MESSAGE
    field.type_name = f".{full}"


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _message(out: descriptor_pb2.DescriptorProto, message: ast.Message, prefix: str, kinds: dict[str, str], proto3: bool) -> None:
    out.name = message.name
    full = f"{prefix}.{message.name}" if prefix else message.name

    synthetic: list[descriptor_pb2.FieldDescriptorProto] = []  # their oneofs go after the real ones

    def field(el, oneof_index: int | None) -> None:
        f = out.field.add(name=el.name, number=el.number)
        if isinstance(el, ast.MapField):
            entry = out.nested_type.add(name=f"{_camel(el.name)}Entry")
            entry.options.map_entry = True
            _set_type(entry.field.add(name="key", number=1, label=F.LABEL_OPTIONAL), el.key_type, full, kinds)
            _set_type(entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL), el.value_type, full, kinds)
            f.label, f.type, f.type_name = F.LABEL_REPEATED, F.TYPE_MESSAGE, f".{full}.{entry.name}"
            return
        card = el.cardinality.value if el.cardinality else ""
        f.label = LABELS.get(card, F.LABEL_OPTIONAL)
        _set_type(f, el.type, full, kinds)
        if oneof_index is not None:
            f.oneof_index = oneof_index
        elif proto3 and card == "OPTIONAL":
            synthetic.append(f)

    for el in message.elements:
        if isinstance(el, ast.Field | ast.MapField):
            field(el, None)
        elif isinstance(el, ast.OneOf):
            index = len(out.oneof_decl)
            out.oneof_decl.add(name=el.name)
            for member in el.elements:
                if isinstance(member, ast.Field):
                    field(member, index)
        elif isinstance(el, ast.Message):
            _message(out.nested_type.add(), el, full, kinds, proto3)
        elif isinstance(el, ast.Enum):
            _enum(out.enum_type.add(), el)
    for f in synthetic:  # protoc's synthetic oneof of a proto3 optional field, named after it
        f.proto3_optional = True
        f.oneof_index = len(out.oneof_decl)
        out.oneof_decl.add(name=f"_{f.name}")
