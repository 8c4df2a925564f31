"""Confluent's Protobuf compatibility rules as a pure check between two schemas.

Incompatible: the package changed; a message removed; a field's kind changed (scalar, map,
message or enum); a scalar changed outside its wire-compatible group (int32, uint32,
int64, uint64 and bool; sint32 and sint64; fixed32 and sfixed32; fixed64 and sfixed64;
string and bytes); a named type changed; repeated changed to singular or back; a required
field added or removed; a field moved into an oneof that existed, or several existing
fields moved into a new one. Compatible: fields and messages added, optional fields removed
(their numbers are then free on the wire), enum constants added or removed.
"""

from __future__ import annotations

from .protobuf_schema import SCALARS, ProtobufSchema

GROUPS = [
    {"int32", "uint32", "int64", "uint64", "bool"},
    {"sint32", "sint64"},
    {"fixed32", "sfixed32"},
    {"fixed64", "sfixed64"},
    {"string", "bytes"},
]


def _kind(type_: str, schema: ProtobufSchema) -> str:
    if type_ in SCALARS:
        return "scalar"
    if type_.startswith("map<"):
        return "map"
    return "enum" if type_ in schema.enums else "message"


def _same_group(a: str, b: str) -> bool:
    return a == b or any(a in g and b in g for g in GROUPS)


def reader_reads_writer(reader: ProtobufSchema, writer: ProtobufSchema) -> list[str]:
    reasons = []
    if reader.package != writer.package:
        reasons.append(f"PACKAGE_CHANGED: {writer.package!r} became {reader.package!r}")
    for name, w_fields in writer.messages.items():
        r_fields = reader.messages.get(name)
        if r_fields is None:
            reasons.append(f"MESSAGE_REMOVED at {name}")
            continue
        reasons += _fields(name, r_fields, w_fields, reader, writer)
    return reasons


def _fields(message: str, r_fields, w_fields, reader: ProtobufSchema, writer: ProtobufSchema) -> list[str]:
    reasons = []
    for number, w in w_fields.items():
        r = r_fields.get(number)
        where = f"{message}#{number}"
        if r is None:
            if w.label == "required":
                reasons.append(f"REQUIRED_FIELD_REMOVED at {where}: '{w.name}'")
            continue
        rk, wk = _kind(r.type, reader), _kind(w.type, writer)
        if rk != wk:
            reasons.append(f"FIELD_KIND_CHANGED at {where}: {wk} {w.type} became {rk} {r.type}")
        elif rk == "scalar" and not _same_group(r.type, w.type):
            reasons.append(f"FIELD_SCALAR_KIND_CHANGED at {where}: {w.type} became {r.type}")
        elif rk != "scalar" and r.type != w.type:
            reasons.append(f"FIELD_NAMED_TYPE_CHANGED at {where}: {w.type} became {r.type}")
        if (r.label == "repeated") != (w.label == "repeated"):
            reasons.append(f"FIELD_KIND_CHANGED at {where}: {w.label} became {r.label}")
        elif r.label == "required" and w.label != "required":
            reasons.append(f"REQUIRED_FIELD_ADDED at {where}: '{r.name}'")
        elif w.label == "required" and r.label != "required":
            reasons.append(f"REQUIRED_FIELD_REMOVED at {where}: '{w.name}'")
    for number, r in r_fields.items():
        if number not in w_fields and r.label == "required":
            reasons.append(f"REQUIRED_FIELD_ADDED at {message}#{number}: '{r.name}'")
    writer_oneofs = {f.oneof for f in w_fields.values() if f.oneof}
    moved: dict[str, list[int]] = {}
    for number, r in r_fields.items():
        w = w_fields.get(number)
        if r.oneof and w is not None and w.oneof != r.oneof:
            if r.oneof in writer_oneofs:
                reasons.append(f"FIELD_MOVED_TO_EXISTING_ONEOF at {message}#{number}: into {r.oneof}")
            else:
                moved.setdefault(r.oneof, []).append(number)
    for oneof, numbers in moved.items():
        if len(numbers) > 1:
            reasons.append(f"MULTIPLE_FIELDS_MOVED_TO_ONEOF at {message}: fields {numbers} into {oneof}")
    return reasons
