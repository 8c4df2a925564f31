"""JSON Schema schemas: checked against their draft's metaschema by ``jsonschema``, kept in a
canonical text (JSON without insignificant whitespace; ``normalized`` also sorts keys).

References to other subjects' schemas (``references`` with ``name`` the ``$ref`` used)
must name registered schemas; the compatibility check resolves local ``$ref`` pointers
(``#/definitions/...``, ``#/$defs/...``) and compares other ``$ref`` values by name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import jsonschema
import jsonschema.exceptions
import jsonschema.validators


class JsonSchemaParseError(ValueError):
    pass


@dataclass
class JsonSchema:
    text: str
    parsed: object
    references: tuple[str, ...] = ()

    schema_type = "JSON"

    def canonical(self) -> str:
        return json.dumps(self.parsed, separators=(",", ":"))

    def normalized(self) -> str:
        return json.dumps(self.parsed, separators=(",", ":"), sort_keys=True)


def parse(text: str, references: list[str] | None = None) -> JsonSchema:
    """Parse and check ``text`` against its ``$schema``'s metaschema (draft 2020-12 without one)."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonSchemaParseError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict | bool):
        raise JsonSchemaParseError("a JSON schema is an object or a boolean")
    validator = jsonschema.validators.validator_for(obj, default=jsonschema.Draft202012Validator)
    try:
        validator.check_schema(obj)
    except jsonschema.exceptions.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "/"
        raise JsonSchemaParseError(f"at {where}: {exc.message}") from None
    for ref_text in references or ():
        json.loads(ref_text)
    return JsonSchema(text, obj, tuple(references or ()))
