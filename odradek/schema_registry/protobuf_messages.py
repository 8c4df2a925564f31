"""Protobuf messages at run time from registered schemas, and Confluent's message-index framing.

A registered Protobuf schema (a base64 ``FileDescriptorProto``, as confluent-kafka's
ProtobufSerializer registers it, or ``.proto`` text) becomes a message class through a
descriptor pool of its own, with its references (imports) added first. After the magic byte
and the schema id, Confluent's framing puts the message's index path in the file as
zigzag varints (a count, then the indexes; ``[0]``, the first message, as one zero byte).
"""

from __future__ import annotations

import base64
import io
from typing import TYPE_CHECKING, Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

if TYPE_CHECKING:
    from .protobuf_schema import ProtobufSchema

_F = descriptor_pb2.FieldDescriptorProto
_SCALAR_TYPES = {
    "double": _F.TYPE_DOUBLE, "float": _F.TYPE_FLOAT, "int64": _F.TYPE_INT64, "uint64": _F.TYPE_UINT64,
    "int32": _F.TYPE_INT32, "fixed64": _F.TYPE_FIXED64, "fixed32": _F.TYPE_FIXED32, "bool": _F.TYPE_BOOL,
    "string": _F.TYPE_STRING, "bytes": _F.TYPE_BYTES, "uint32": _F.TYPE_UINT32, "sfixed32": _F.TYPE_SFIXED32,
    "sfixed64": _F.TYPE_SFIXED64, "sint32": _F.TYPE_SINT32, "sint64": _F.TYPE_SINT64,
}  # fmt: skip


def file_descriptor(text: str, name: str) -> descriptor_pb2.FileDescriptorProto:
    """The ``FileDescriptorProto`` of a registered schema text (base64 descriptor or .proto)."""
    # The .proto parser takes most of a second to import: only schemas that need it load it.
    from . import protobuf_schema

    fd = protobuf_schema._as_descriptor(text)
    if fd is None:
        fd = _from_model(protobuf_schema.parse(text))
    fd.name = name
    return fd


def _from_model(model: ProtobufSchema) -> descriptor_pb2.FileDescriptorProto:
    """A descriptor rebuilt from the registry's model of a .proto text (messages, enums, fields)."""
    labels = {f.label for fields in model.messages.values() for f in fields.values()}
    fd = descriptor_pb2.FileDescriptorProto(package=model.package, syntax="proto2" if "required" in labels else "proto3")
    prefix = f"{model.package}." if model.package else ""
    containers: dict[str, Any] = {}  # message full name → its DescriptorProto

    def scope(full: str) -> tuple[Any, str]:
        """The message a type named ``full`` is declared in (None: the file) and its short name."""
        parent, _, short = full[len(prefix):].rpartition(".")
        return (containers[prefix + parent] if parent else None), short

    for full in sorted(model.messages, key=lambda n: n.count(".")):
        holder, short = scope(full)
        containers[full] = (fd.message_type if holder is None else holder.nested_type).add(name=short)
    for full, values in model.enums.items():
        holder, short = scope(full)
        enum = (fd.enum_type if holder is None else holder.enum_type).add(name=short)
        for number, value in enumerate(values):
            enum.value.add(name=value, number=number)
    for full, fields in model.messages.items():
        msg = containers[full]
        oneofs: dict[str, int] = {}
        for number, f in sorted(fields.items()):
            field = msg.field.add(name=f.name, number=number)
            field.label = {"repeated": _F.LABEL_REPEATED, "required": _F.LABEL_REQUIRED}.get(f.label, _F.LABEL_OPTIONAL)
            if f.oneof:
                if f.oneof not in oneofs:
                    oneofs[f.oneof] = len(msg.oneof_decl)
                    msg.oneof_decl.add(name=f.oneof)
                field.oneof_index = oneofs[f.oneof]
            if f.type.startswith("map<"):
                key_type, value_type = f.type[4:-1].split(",", 1)
                entry = msg.nested_type.add(name="".join(p.title() for p in f.name.split("_")) + "Entry")
                entry.options.map_entry = True
                _set_type(entry.field.add(name="key", number=1, label=_F.LABEL_OPTIONAL), key_type.strip(), model)
                _set_type(entry.field.add(name="value", number=2, label=_F.LABEL_OPTIONAL), value_type.strip(), model)
                field.label = _F.LABEL_REPEATED
                field.type = _F.TYPE_MESSAGE
                field.type_name = f".{full}.{entry.name}"
            else:
                _set_type(field, f.type, model)
    return fd


def _set_type(field, type_name: str, model: ProtobufSchema) -> None:
    if type_name in _SCALAR_TYPES:
        field.type = _SCALAR_TYPES[type_name]
    elif type_name in model.enums:
        field.type, field.type_name = _F.TYPE_ENUM, f".{type_name}"
    elif type_name == "google.protobuf.Timestamp" or type_name in model.messages:
        field.type, field.type_name = _F.TYPE_MESSAGE, f".{type_name}"
    else:
        raise ValueError(f"unknown type {type_name} (imports other than references?)")


def message_class(files: list[descriptor_pb2.FileDescriptorProto], message: str | None):
    """The class of ``message`` (full name; the first message of the last file when None),
    with ``files`` (dependencies first, the schema last) in a pool of their own."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    for fd in files:
        if fd.name != timestamp_pb2.DESCRIPTOR.name:
            pool.Add(fd)
    main = files[-1]
    if message is None:
        if not main.message_type:
            raise ValueError("the schema defines no message")
        message = f"{main.package}.{main.message_type[0].name}" if main.package else main.message_type[0].name
    try:
        descriptor = pool.FindMessageTypeByName(message)
    except KeyError:
        raise ValueError(f"the schema has no message {message}") from None
    return message_factory.GetMessageClass(descriptor)


def message_indexes(descriptor) -> list[int]:
    """The index path of a message in its file (Confluent's framing)."""
    path = []
    while descriptor is not None:
        parent = descriptor.containing_type
        siblings = parent.nested_types if parent is not None else list(descriptor.file.message_types_by_name.values())
        path.append([s.full_name for s in siblings].index(descriptor.full_name))
        descriptor = parent
    return path[::-1]


def encode_indexes(indexes: list[int]) -> bytes:
    if indexes == [0]:
        return b"\x00"
    out = io.BytesIO()
    for value in (len(indexes), *indexes):
        value = (value << 1) ^ (value >> 63)
        while value > 0x7F:
            out.write(bytes([(value & 0x7F) | 0x80]))
            value >>= 7
        out.write(bytes([value]))
    return out.getvalue()


def skip_indexes(payload: bytes) -> bytes:
    """The message bytes after the index path (ValueError when the path is cut short)."""
    pos = 0

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            if pos >= len(payload):
                raise ValueError("the message index path is cut short")
            byte = payload[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)
            shift += 7

    count = varint()
    if count < 0 or count > 100:
        raise ValueError(f"a message index path of {count} entries is not Confluent's framing")
    for _ in range(count):
        varint()
    return payload[pos:]


def schema_text(fd: descriptor_pb2.FileDescriptorProto) -> str:
    """How the sink registers a descriptor: base64, as confluent-kafka does."""
    return base64.standard_b64encode(fd.SerializeToString()).decode("ascii")
