"""Is a message body well formed for its schema? Checked before kio reads it.

kio's native reader trusts the lengths it reads: given a compact array whose length
varint says 2**32, it reserves room for that many items before it looks at one, and the
process aborts. So every request body (and, in the client, every response body) is first
walked here over kio's own schema for its API key and version:

- every array, string and bytes length is bounded by the bytes left in the body (an
  array of n items needs at least n times its smallest item), so kio never makes more
  objects than the frame has bytes;
- null (-1, or 0 in a compact length) is refused where the schema does not allow it;
  kio would hand such a null to the handlers as None;
- a known tagged field must fill exactly the size its header declares, because kio reads
  it with the field's own reader and ignores that size: a walk that trusted the size
  while kio did not would check bytes other than those kio reads.

The walk follows kio's reading rules exactly (which reader for which field, compact or
classic by the entity's flexibility, nullable structs with an int8 marker), so that it
checks the same bytes kio will read. What kio checks safely by itself (UTF-8, booleans,
negative string lengths, unknown tags) is left to kio; a body that passes here can only
make kio raise, never abort.

Each entity class is compiled once into a tuple of steps (runs of fixed-size fields
collapse into one skip; an array of fixed-size items is checked by multiplication), and
the steps into one generated Python function.
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from functools import cache

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

if typing.TYPE_CHECKING:
    from kio.static.protocol import Entity


class MalformedMessage(ValueError):
    """The body does not match its schema, or claims more than the frame holds."""


# Step codes. A step is (code, a, b); a and b depend on the code.
SKIP = 0  # a = byte count
COMPACT_STRING = 1  # a = nullable (compact strings and compact bytes)
STRING16 = 2  # a = nullable (int16 length)
BYTES32 = 3  # a = nullable (int32 length)
COMPACT_ARRAY = 4  # a = nullable, b = (item step, fewest bytes an item takes)
ARRAY32 = 5  # a = nullable, b = (item step, fewest bytes an item takes)
STRUCT = 6  # a = nullable (int8 marker first), b = the entity's steps
TAGS = 7  # a = {tag: step} of the entity's known tagged fields

_I32 = struct.Struct(">i").unpack_from

_FIXED_SIZES = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}


def check(cls: type[Entity], buf, pos: int) -> int:
    """Walk the body of kio entity class ``cls`` in ``buf`` from ``pos``; return where it
    ends. Raises MalformedMessage."""
    try:
        return checker(cls)(buf, pos, len(buf))
    except (IndexError, struct.error):
        raise MalformedMessage(f"{cls.__name__} runs past the end of the frame") from None


# -- compiling a schema into steps ----------------------------------------------------------


@cache
def steps_of(cls: type[Entity]) -> tuple:
    """The steps that walk one ``cls`` entity (its tagged fields last when flexible)."""
    flexible = cls.__flexible__
    steps: list = []
    tags: dict = {}
    for field in dataclasses.fields(cls):
        tag = get_field_tag(field)
        step = _field_step(field, flexible, tagged=tag is not None)
        if tag is not None:
            tags[int(tag)] = step
        elif step[0] == SKIP and steps and steps[-1][0] == SKIP:
            steps[-1] = (SKIP, steps[-1][1] + step[1], None)
        else:
            steps.append(step)
    if flexible:
        steps.append((TAGS, tags, None))
    return tuple(steps)


def _field_step(field: dataclasses.Field, flexible: bool, tagged: bool) -> tuple:
    kind = classify_field(field)
    if isinstance(kind, EntityTupleField):
        item = (STRUCT, False, steps_of(kind.type_))
    elif isinstance(kind, EntityField):
        # kio reads a nullable struct's marker even when the field is tagged
        return (STRUCT, is_optional(field), steps_of(kind.type_))
    elif isinstance(kind, PrimitiveTupleField):
        item = _primitive_step(field.metadata["kafka_type"], flexible, nullable=False)
    else:
        # kio reads a tagged primitive as non-nullable, whatever its type says
        return _primitive_step(field.metadata["kafka_type"], flexible, is_optional(field) and not tagged)
    # the fewest bytes an item takes bounds the count; never 0, so a count never exceeds the bytes left
    least = max(1, min_size(item))
    return (COMPACT_ARRAY if flexible else ARRAY32, _array_is_nullable(field.type), (item, least))


def _primitive_step(kafka_type: str, flexible: bool, nullable: bool) -> tuple:
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        return (SKIP, size, None)
    if kafka_type not in ("string", "bytes", "records"):
        raise TypeError(f"no rule for kio type {kafka_type!r}")
    if flexible:
        return (COMPACT_STRING, nullable, None)
    return (STRING16 if kafka_type == "string" else BYTES32, nullable, None)


def _array_is_nullable(hint) -> bool:
    """``tuple[X, ...] | None`` is a nullable array; ``tuple[X | None, ...]`` is not."""
    return typing.get_origin(hint) in (types.UnionType, typing.Union) and type(None) in typing.get_args(hint)


def min_size(step: tuple) -> int:
    """The fewest bytes a well-formed ``step`` can take."""
    code, a, b = step
    if code == SKIP:
        return a
    if code == STRUCT:
        return 1 if a else sum(min_size(s) for s in b)
    return {COMPACT_STRING: 1, STRING16: 2, BYTES32: 4, COMPACT_ARRAY: 1, ARRAY32: 4, TAGS: 1}[code]


# -- generating the check of one entity -----------------------------------------------------
#
# The steps of an entity become the straight-line Python of one function, nested structs
# and array items inlined, so that a check costs about what kio's own decode does (an
# interpreter over the steps cost twice that). ``source_of`` shows what a class becomes.


@cache
def checker(cls: type[Entity]):
    """``check(buf, pos, end) -> end of body`` for ``cls``, compiled from its steps."""
    return _compile(steps_of(cls), f"check_{cls.__name__}")


def source_of(cls: type[Entity]) -> str:
    return _Emitter().function(steps_of(cls), f"check_{cls.__name__}")


def _compile(steps: tuple, name: str):
    emitter = _Emitter()
    source = emitter.function(steps, name)
    namespace = {"_uvarint": _uvarint, "_tags": _tags, "_I32": _I32, "Malformed": MalformedMessage}
    namespace.update(emitter.tag_tables)
    exec(compile(source, f"<wellformed {name}>", "exec"), namespace)
    return namespace[name]


class _Emitter:
    def __init__(self):
        self.lines: list[str] = []
        self.tag_tables: dict[str, dict] = {}  # name in the generated code -> {tag: checker}

    def function(self, steps: tuple, name: str) -> str:
        self.lines.append(f"def {name}(buf, pos, end):")
        self.block(steps, 1)
        self.lines.append("    return pos")
        self.lines.append("")
        return "\n".join(self.lines)

    def block(self, steps: tuple, depth: int) -> None:
        before = len(self.lines)
        for step in steps:
            getattr(self, _EMIT[step[0]])(step[1], step[2], depth)
        if len(self.lines) == before:
            self.put(depth, "pass")

    def put(self, depth: int, *lines: str) -> None:
        self.lines.extend("    " * depth + line for line in lines)

    def skip(self, size, _, depth):
        self.put(depth, f"pos += {size}", "if pos > end:", f"    raise Malformed({_PAST!r})")

    def compact_length(self, depth):
        self.put(depth, "n = buf[pos]", "if n < 0x80:", "    pos += 1", "else:", "    n, pos = _uvarint(buf, pos)")

    def compact_string(self, nullable, _, depth):
        self.compact_length(depth)
        depth = self.unless_null(nullable, _NULL_STRING, depth)
        self.put(depth, "pos += n - 1", "if pos > end:")
        self.put(depth + 1, 'raise Malformed(f"string of {n - 1} bytes runs past the end of the frame")')

    def unless_null(self, nullable: bool, refusal: str, depth: int) -> int:
        """After a compact length ``n``: skip a null, or refuse it. Returns the depth of
        the code for a non-null value."""
        if nullable:
            self.put(depth, "if n:")
            return depth + 1
        self.put(depth, "if not n:", f"    raise Malformed({refusal!r})")
        return depth

    def string16(self, nullable, _, depth):
        self.put(depth, "n = (buf[pos] << 8) | buf[pos + 1]", "pos += 2", "if n < 0x8000:")
        self.put(depth + 1, "pos += n", "if pos > end:")
        self.put(depth + 2, 'raise Malformed(f"string of {n} bytes runs past the end of the frame")')
        self.put(depth, "elif n != 0xFFFF:", '    raise Malformed(f"negative string length {n - 0x10000}")')
        if not nullable:
            self.put(depth, "else:", f"    raise Malformed({_NULL_STRING!r})")

    def bytes32(self, nullable, _, depth):
        self.put(depth, "n = _I32(buf, pos)[0]", "pos += 4", "if n >= 0:")
        self.put(depth + 1, "pos += n", "if pos > end:")
        self.put(depth + 2, 'raise Malformed(f"{n} bytes run past the end of the frame")')
        self.put(depth, "elif n != -1:", '    raise Malformed(f"negative bytes length {n}")')
        if not nullable:
            self.put(depth, "else:", "    raise Malformed('null bytes where the schema forbids it')")

    def compact_array(self, nullable, item, depth):
        self.compact_length(depth)
        depth = self.unless_null(nullable, _NULL_ARRAY, depth)
        self.put(depth, "n -= 1")
        self.items(item, depth)

    def array32(self, nullable, item, depth):
        self.put(depth, "n = _I32(buf, pos)[0]", "pos += 4")
        if nullable:
            self.put(depth, "if n < -1:", '    raise Malformed(f"negative array length {n}")', "if n > 0:")
            depth += 1
        else:
            self.put(depth, "if n == -1:", f"    raise Malformed({_NULL_ARRAY!r})", "if n < 0:")
            self.put(depth, '    raise Malformed(f"negative array length {n}")')
        self.items(item, depth)

    def items(self, item, depth):
        """``n`` items; a count the remaining bytes cannot hold is refused before any is read."""
        step, least = item
        self.put(depth, f"if n * {least} > end - pos:")
        self.put(depth + 1, f'raise Malformed(f"array of {{n}} items (at least {least} bytes each) {_PAST}")')
        if step[0] == SKIP:
            self.put(depth, f"pos += n * {step[1]}")
        else:
            self.put(depth, "for _ in range(n):")
            self.block((step,), depth + 1)

    def struct(self, nullable, steps, depth):
        if not nullable:
            self.block(steps, depth)
            return
        self.put(depth, "m = buf[pos]", "pos += 1", "if m == 1:")
        self.block(steps, depth + 1)
        self.put(depth, "elif m != 0xFF:", '    raise Malformed(f"nullable struct marker {m} is neither -1 nor 1")')

    def tags(self, known, _, depth):
        name = f"TAGS_{len(self.tag_tables)}"
        self.tag_tables[name] = {tag: _compile((step,), f"check_tag_{tag}") for tag, step in known.items()}
        self.put(depth, "if buf[pos]:", f"    pos = _tags({name}, buf, pos, end)", "else:", "    pos += 1")


_EMIT = {
    SKIP: "skip",
    COMPACT_STRING: "compact_string",
    STRING16: "string16",
    BYTES32: "bytes32",
    COMPACT_ARRAY: "compact_array",
    ARRAY32: "array32",
    STRUCT: "struct",
    TAGS: "tags",
}
_PAST = "runs past the end of the frame"
_NULL_STRING = "null string where the schema forbids it"
_NULL_ARRAY = "null array where the schema forbids it"


# -- what the generated code calls -----------------------------------------------------------


def _uvarint(buf, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes, as kio reads it (no 32-bit wrap)."""
    value = 0
    for shift in (0, 7, 14, 21, 28):
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
    raise MalformedMessage("varint longer than 5 bytes")


def _tags(known: dict, buf, pos: int, end: int) -> int:
    """A tagged-field section that is not empty: known fields are checked, unknown ones
    skipped (kio refuses those itself, safely)."""
    count, pos = _uvarint(buf, pos)
    if 2 * count > end - pos:
        raise MalformedMessage(f"{count} tagged fields run past the end of the frame")
    for _ in range(count):
        tag, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        stop = pos + size
        if stop > end:
            raise MalformedMessage(f"tagged field {tag} of {size} bytes runs past the end of the frame")
        check_field = known.get(tag)
        if check_field is not None:
            try:
                filled = check_field(buf, pos, stop)
            except MalformedMessage as exc:
                raise MalformedMessage(f"tagged field {tag}: {exc}") from None
            if filled != stop:
                raise MalformedMessage(f"tagged field {tag} does not fill its declared {size} bytes")
        pos = stop
    return pos
