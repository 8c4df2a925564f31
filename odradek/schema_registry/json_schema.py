"""JSON Schema schemas: checked against their draft's metaschema by ``jsonschema``, kept in a
canonical text (JSON without insignificant whitespace; ``normalized`` also sorts keys).

References to other subjects' schemas (``references`` with ``name`` the ``$ref`` used, as
Confluent's registry and clients have them) are resolved with ``referencing``: each
referenced schema is a resource under its name (and under that name taken relative to the
schema's ``$id``), so ``{"$ref": "address.json"}`` or ``"address.json#/definitions/Street"``
finds it. A ``$ref`` to another document that no reference names is refused: the registry
never fetches schemas from the network.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from urllib.parse import urljoin

import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import referencing
import referencing.exceptions
import referencing.jsonschema


class JsonSchemaParseError(ValueError):
    pass


@dataclass
class JsonSchema:
    text: str
    parsed: object
    references: tuple[str, ...] = ()
    resolver: referencing._core.Resolver | None = field(default=None, repr=False, compare=False)

    schema_type = "JSON"

    def canonical(self) -> str:
        return json.dumps(self.parsed, separators=(",", ":"))

    def normalized(self) -> str:
        return json.dumps(self.parsed, separators=(",", ":"), sort_keys=True)


def _resource(obj) -> referencing.Resource:
    return referencing.Resource.from_contents(obj, default_specification=referencing.jsonschema.DRAFT202012)


def _refs(node):
    """Every ``$ref`` string in a schema, depth first."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            elif key not in ("enum", "const", "default", "examples"):  # values, not schemas
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _loads(text: str, what: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonSchemaParseError(f"{what} is not JSON: {exc}") from None


def parse(text: str, references: list[tuple[str, str]] | None = None) -> JsonSchema:
    """Parse and check ``text`` against its ``$schema``'s metaschema (draft 2020-12 without one);
    ``references`` are (name, text) of the schemas its ``$ref``s may name."""
    obj = _loads(text, "the schema")
    if not isinstance(obj, dict | bool):
        raise JsonSchemaParseError("a JSON schema is an object or a boolean")
    validator = jsonschema.validators.validator_for(obj, default=jsonschema.Draft202012Validator)
    try:
        validator.check_schema(obj)
    except jsonschema.exceptions.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "/"
        raise JsonSchemaParseError(f"at {where}: {exc.message}") from None
    root = _resource(obj)
    base = root.id() or ""
    resources: list[tuple[str, referencing.Resource]] = []
    for name, ref_text in references or ():
        try:
            resource = _resource(_loads(ref_text, f"the referenced schema {name!r}"))
        except referencing.exceptions.CannotDetermineSpecification as exc:
            raise JsonSchemaParseError(f"the referenced schema {name!r}: {exc}") from None
        resources += [(name, resource), (urljoin(base, name), resource)]
    resolver = referencing.Registry().with_resources(resources).resolver_with_root(root)
    for ref in _refs(obj):
        try:
            resolver.lookup(ref)
        except referencing.exceptions.Unresolvable:
            if ref.startswith("#"):
                raise JsonSchemaParseError(f"$ref {ref!r} points at nothing in the schema") from None
            raise JsonSchemaParseError(
                f"$ref {ref!r} names no schema this one references: register that schema, then add "
                f'{{"name": "{ref.split("#")[0]}", "subject": ..., "version": ...}} to the references'
            ) from None
    return JsonSchema(text, obj, tuple(t for _, t in references or ()), resolver)
