"""JSON Schema ``$ref``s to other registered schemas, named through schema references
(``{"name": <the $ref>, "subject", "version"}``, as Confluent's registry and clients have
them): resolved when registering, in compatibility checks, and by confluent-kafka's
JSONSerializer and JSONDeserializer."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError


def address(street_type: str = "string") -> str:
    return json.dumps({
        "type": "object",
        "properties": {"street": {"type": street_type}, "city": {"type": "string"}},
        "required": ["street"], "additionalProperties": False,
    })  # fmt: skip


ORDER = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {"id": {"type": "integer"}, "ship_to": {"$ref": "address.json"}},
    "required": ["id", "ship_to"],
})  # fmt: skip


def order_body(subject: str, version: int = 1) -> dict:
    return {
        "schemaType": "JSON",
        "schema": ORDER,
        "references": [{"name": "address.json", "subject": subject, "version": version}],
    }


def test_a_ref_to_a_referenced_schema_serializes_validates_and_deserializes(registry):
    registry.ok("POST", "/subjects/address/versions", {"schemaType": "JSON", "schema": address()})
    client = SchemaRegistryClient({"url": registry.url})
    schema = Schema(ORDER, "JSON", [SchemaReference("address.json", "address", 1)])
    serializer = JSONSerializer(schema, client)  # registers orders-value with its reference
    ctx = SerializationContext("orders", MessageField.VALUE)
    order = {"id": 7, "ship_to": {"street": "Main St 1", "city": "Prague"}}
    framed = serializer(order, ctx)
    registered = registry.ok("GET", "/subjects/orders-value/versions/latest")
    assert registered["references"] == [{"name": "address.json", "subject": "address", "version": 1}]
    assert int.from_bytes(framed[1:5], "big") == registered["id"]
    deserializer = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient({"url": registry.url}))
    assert deserializer(framed, ctx) == order
    with pytest.raises(SerializationError, match="street"):  # the referenced schema is what validates
        serializer({"id": 8, "ship_to": {"city": "Brno"}}, ctx)


def test_compatibility_checks_look_through_the_reference(registry):
    registry.ok("POST", "/subjects/address/versions", {"schemaType": "JSON", "schema": address()})
    registry.ok("POST", "/subjects/address-numbered/versions", {"schemaType": "JSON", "schema": address("integer")})
    registry.ok("POST", "/subjects/orders-value/versions", order_body("address"))
    # The same $ref, now naming a schema whose street is a number: old orders do not read.
    verdict = registry.ok("POST", "/compatibility/subjects/orders-value/versions/latest?verbose=true", order_body("address-numbered"))
    assert verdict["is_compatible"] is False
    assert any("/properties/ship_to/properties/street" in m for m in verdict["messages"]), verdict
    assert registry.error("POST", "/subjects/orders-value/versions", order_body("address-numbered")) == (409, 409)
    # A compatible change of the referenced schema (an optional property in its closed model) goes through.
    widened = json.loads(address())
    widened["properties"]["zip"] = {"type": "string"}
    registry.ok("POST", "/subjects/address/versions", {"schemaType": "JSON", "schema": json.dumps(widened)})
    assert registry.ok("POST", "/subjects/orders-value/versions", order_body("address", 2))["id"] > 0
    assert registry.ok("GET", "/subjects/orders-value/versions") == [1, 2]


def test_unknown_references_are_refused_with_what_to_do(registry):
    no_reference = {"schemaType": "JSON", "schema": ORDER}  # $ref address.json, no references
    resp = registry.request("POST", "/subjects/orders-value/versions", no_reference)
    assert (resp.status_code, resp.json()["error_code"]) == (422, 42201)
    assert "address.json" in resp.json()["message"] and "references" in resp.json()["message"]
    resp = registry.request("POST", "/subjects/orders-value/versions", order_body("no-such-subject"))
    assert (resp.status_code, resp.json()["error_code"]) == (422, 42201)
    assert "no-such-subject" in resp.json()["message"]
    dangling = {"schemaType": "JSON", "schema": json.dumps({"$ref": "#/definitions/missing"})}
    assert registry.error("POST", "/subjects/dangling/versions", dangling) == (422, 42201)
    assert registry.error("GET", "/subjects/orders-value/versions") == (404, 40401), "nothing stored"
