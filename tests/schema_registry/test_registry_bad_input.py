"""Bad input the REST API must refuse with the right code, storing nothing, while it keeps
serving: malformed references, unknown references of each type, bodies of the wrong shape,
hostile nesting, levels and modes that do not exist, deletes of what is referenced."""

from __future__ import annotations

import json

import requests

CT = "application/vnd.schemaregistry.v1+json"
ADDRESS = json.dumps({"type": "record", "name": "Address", "namespace": "ex", "fields": [{"name": "city", "type": "string"}]})
USER = json.dumps({"type": "record", "name": "User", "namespace": "ex", "fields": [{"name": "home", "type": "ex.Address"}]})
POINT = json.dumps({"type": "object", "properties": {"x": {"type": "number"}}})
SHAPE = json.dumps({"type": "object", "properties": {"at": {"$ref": "point.json"}}})


def test_references_that_are_malformed_or_unknown_are_refused_and_nothing_is_stored(registry):
    assert registry.ok("POST", "/subjects/address/versions", {"schema": ADDRESS}) == {"id": 1}
    good = {"name": "ex.Address", "subject": "address", "version": 1}
    for references in (
        "address",  # not a list
        [good, "address"],  # an item that is not an object
        [{"name": "ex.Address", "subject": "address"}],  # no version
        [{"name": "ex.Address", "subject": "address", "version": "1"}],  # a version that is not an integer
        [{"subject": "address", "version": 1}],  # no name
        [good, {"name": "ex.Other", "subject": "nowhere", "version": 1}],  # one known, one unknown subject
        [{"name": "ex.Address", "subject": "address", "version": 2}],  # an unknown version
    ):
        got = registry.error("POST", "/subjects/user/versions", {"schema": USER, "references": references})
        assert got == (422, 42201), references
    # JSON Schema and Protobuf references to subjects that do not exist: the same code.
    json_ref = [{"name": "point.json", "subject": "point", "version": 1}]
    assert registry.error("POST", "/subjects/shape/versions", {"schema": SHAPE, "schemaType": "JSON", "references": json_ref}) == (422, 42201)
    proto = 'syntax = "proto3"; import "geo/point.proto"; message Shape { geo.Point at = 1; }'
    proto_ref = [{"name": "geo/point.proto", "subject": "geo-point", "version": 1}]
    assert registry.error("POST", "/subjects/shape/versions", {"schema": proto, "schemaType": "PROTOBUF", "references": proto_ref}) == (422, 42201)
    assert registry.ok("GET", "/subjects") == ["address"]
    assert registry.ok("GET", "/subjects/address/versions/1/referencedby") == []
    # With the referenced schema registered, the same JSON body is taken.
    registry.ok("POST", "/subjects/point/versions", {"schema": POINT, "schemaType": "JSON"})
    shape_id = registry.ok("POST", "/subjects/shape/versions", {"schema": SHAPE, "schemaType": "JSON", "references": json_ref})["id"]
    assert registry.ok("GET", "/subjects/point/versions/1/referencedby") == [shape_id]
    # Referenced: neither the subject nor the version may go, softly or permanently.
    assert registry.error("DELETE", "/subjects/point") == (422, 42206)
    assert registry.error("DELETE", "/subjects/point/versions/latest") == (422, 42206)
    assert registry.error("DELETE", "/subjects/point/versions/1?permanent=true") == (422, 42206)
    assert registry.ok("GET", "/subjects/point/versions") == [1]


def test_bodies_of_the_wrong_shape_and_hostile_nesting_get_codes_not_500s(registry):
    for body, expected in (
        ([1, 2], (422, 422)),  # not an object
        ("just a string", (422, 422)),
        ({"schema": 17}, (422, 42201)),  # a schema that is not a string
        ({"schema": ""}, (422, 42201)),
        ({}, (422, 42201)),
        ({"schema": "[" * 50_000 + "]" * 50_000}, (422, 42201)),  # nesting deeper than any parser recursion
        ({"schema": ADDRESS, "schemaType": 5}, (422, 42201)),
    ):
        assert registry.error("POST", "/subjects/s/versions", body) == expected, str(body)[:80]
    deep = ("[" * 100_000 + "]" * 100_000).encode()
    resp = requests.post(f"{registry.url}/subjects/s/versions", data=deep, headers={"Content-Type": CT}, timeout=30)
    assert (resp.status_code, resp.json()["error_code"]) == (400, 400)
    for path, body in (("/config", {"compatibility": None}), ("/config/s", {"level": "FULL"}), ("/config", [])):
        assert registry.error("PUT", path, body) == (422, 42203), (path, body)
    assert registry.error("PUT", "/mode/s", {"mode": 3}) == (422, 42204)
    assert registry.error("GET", "/schemas/ids/abc") == (404, 404)
    assert registry.error("GET", "/subjects/s/versions/99999999999") == (422, 42202)
    assert registry.ok("GET", "/subjects") == []
    assert registry.ok("GET", "/config") == {"compatibilityLevel": "BACKWARD"}
    # Still serving.
    assert registry.ok("POST", "/subjects/s/versions", {"schema": ADDRESS}) == {"id": 1}
