"""The REST API v1 of a registry process on a real broker: answers and Confluent's error codes."""

from __future__ import annotations

import json

import requests

CT = "application/vnd.schemaregistry.v1+json"


def avro(name="User", *fields) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": "id", "type": "long"}, *fields]})


V1 = avro()
V2 = avro("User", {"name": "email", "type": "string", "default": ""})
V2_NO_DEFAULT = avro("User", {"name": "email", "type": "string"})


def test_register_get_and_the_same_schema_keeps_its_id_across_subjects(registry):
    assert registry.ok("POST", "/subjects/users-value/versions", {"schema": V1}) == {"id": 1}
    # The same schema again: no new version, same id; in another subject: a new version, same id.
    assert registry.ok("POST", "/subjects/users-value/versions", {"schema": V1}) == {"id": 1}
    assert registry.ok("POST", "/subjects/other-value/versions", {"schema": V1}) == {"id": 1}
    assert registry.ok("POST", "/subjects/users-value/versions", {"schema": V2}) == {"id": 2}
    assert registry.ok("GET", "/subjects/users-value/versions") == [1, 2]
    latest = registry.ok("GET", "/subjects/users-value/versions/latest")
    assert latest == {"subject": "users-value", "version": 2, "id": 2, "schema": json.dumps(json.loads(V2), separators=(",", ":"))}
    assert registry.ok("GET", "/subjects/users-value/versions/1")["id"] == 1
    assert registry.ok("GET", "/subjects/users-value/versions/2/schema") == json.loads(V2)
    assert json.loads(registry.ok("GET", "/schemas/ids/2")["schema"]) == json.loads(V2)
    assert registry.ok("GET", "/schemas/ids/1/schema") == json.loads(V1)
    assert registry.ok("GET", "/schemas/ids/1/subjects") == ["other-value", "users-value"]
    assert registry.ok("GET", "/schemas/ids/1/versions") == [
        {"subject": "other-value", "version": 1},
        {"subject": "users-value", "version": 1},
    ]
    assert registry.ok("GET", "/schemas/types") == ["AVRO", "JSON", "PROTOBUF"]
    assert registry.ok("GET", "/subjects") == ["other-value", "users-value"]
    assert registry.ok("GET", "/subjects?subjectPrefix=us") == ["users-value"]
    # Lookup by content (whitespace does not matter), and the content type of the answers.
    spaced = json.dumps(json.loads(V1), indent=2)
    assert registry.ok("POST", "/subjects/users-value", {"schema": spaced})["version"] == 1
    resp = registry.request("GET", "/subjects")
    assert resp.headers["Content-Type"].startswith(CT)


def test_not_found_and_invalid_input_codes(registry):
    registry.ok("POST", "/subjects/s/versions", {"schema": V1})
    assert registry.error("GET", "/subjects/nope/versions") == (404, 40401)
    assert registry.error("GET", "/subjects/s/versions/7") == (404, 40402)
    assert registry.error("GET", "/schemas/ids/99") == (404, 40403)
    assert registry.error("POST", "/subjects/s", {"schema": V2}) == (404, 40403)
    assert registry.error("POST", "/subjects/nope", {"schema": V1}) == (404, 40401)
    assert registry.error("GET", "/subjects/s/versions/0") == (422, 42202)
    assert registry.error("GET", "/subjects/s/versions/x") == (422, 42202)
    assert registry.error("POST", "/subjects/s/versions", {"schema": "{not json"}) == (422, 42201)
    assert registry.error("POST", "/subjects/s/versions", {"schema": '{"type":"record","name":"A"}'}) == (422, 42201)
    assert registry.error("POST", "/subjects/s/versions", {"schema": V1, "schemaType": "XML"}) == (422, 42201)
    assert registry.error("PUT", "/config", {"compatibility": "SIDEWAYS"}) == (422, 42203)
    assert registry.error("PUT", "/mode", {"mode": "SOMETIMES"}) == (422, 42204)
    # Wrong content type, a body that is not JSON, a body over the limit.
    form = registry.request("POST", "/subjects/s/versions", headers={"Content-Type": "text/plain"}, data=b"{}")
    assert (form.status_code, form.json()["error_code"]) == (415, 415)
    bad = requests.post(f"{registry.url}/subjects/s/versions", data=b"{oops", headers={"Content-Type": CT}, timeout=30)
    assert (bad.status_code, bad.json()["error_code"]) == (400, 400)
    huge = requests.post(
        f"{registry.url}/subjects/s/versions",
        data=json.dumps({"schema": " " * (17 * 1024 * 1024)}),
        headers={"Content-Type": CT},
        timeout=60,
    )
    assert huge.status_code == 413 and huge.json()["error_code"] == 413
    # None of that stored anything.
    assert registry.ok("GET", "/subjects") == ["s"]
    assert registry.ok("GET", "/subjects/s/versions") == [1]


def test_incompatible_schemas_are_refused_per_level_and_checked_on_request(registry):
    registry.ok("POST", "/subjects/s/versions", {"schema": V1})
    assert registry.error("POST", "/subjects/s/versions", {"schema": V2_NO_DEFAULT}) == (409, 409)
    check = registry.ok("POST", "/compatibility/subjects/s/versions/latest?verbose=true", {"schema": V2_NO_DEFAULT})
    assert check["is_compatible"] is False
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in check["messages"][0]
    assert registry.ok("POST", "/compatibility/subjects/s/versions/1", {"schema": V2}) == {"is_compatible": True}
    assert registry.ok("POST", "/compatibility/subjects/s/versions", {"schema": V2}) == {"is_compatible": True}
    assert registry.error("POST", "/compatibility/subjects/s/versions/9", {"schema": V2}) == (404, 40402)
    # FORWARD lets the field without a default in.
    assert registry.ok("PUT", "/config/s", {"compatibility": "forward"}) == {"compatibility": "FORWARD"}
    assert registry.ok("POST", "/subjects/s/versions", {"schema": V2_NO_DEFAULT}) == {"id": 2}
    assert registry.ok("GET", "/subjects/s/versions") == [1, 2]


def test_configs_global_and_per_subject(registry):
    assert registry.ok("GET", "/config") == {"compatibilityLevel": "BACKWARD"}
    registry.ok("POST", "/subjects/s/versions", {"schema": V1})
    assert registry.error("GET", "/config/s") == (404, 40408)
    assert registry.ok("GET", "/config/s?defaultToGlobal=true") == {"compatibilityLevel": "BACKWARD"}
    assert registry.ok("PUT", "/config", {"compatibility": "FULL"}) == {"compatibility": "FULL"}
    assert registry.ok("PUT", "/config/s", {"compatibility": "NONE"}) == {"compatibility": "NONE"}
    assert registry.ok("GET", "/config/s") == {"compatibilityLevel": "NONE"}
    assert registry.ok("POST", "/subjects/s/versions", {"schema": avro("Other")})["id"] == 2
    assert registry.ok("DELETE", "/config/s") == {"compatibilityLevel": "NONE"}
    assert registry.ok("GET", "/config/s?defaultToGlobal=true") == {"compatibilityLevel": "FULL"}
    assert registry.ok("DELETE", "/config") == {"compatibilityLevel": "FULL"}
    assert registry.ok("GET", "/config") == {"compatibilityLevel": "BACKWARD"}


def test_soft_and_permanent_deletes(registry):
    registry.ok("POST", "/subjects/s/versions", {"schema": V1})
    registry.ok("POST", "/subjects/s/versions", {"schema": V2})
    # A version: permanently only after softly.
    assert registry.error("DELETE", "/subjects/s/versions/1?permanent=true") == (404, 40407)
    assert registry.ok("DELETE", "/subjects/s/versions/1") == 1
    assert registry.error("DELETE", "/subjects/s/versions/1") == (404, 40406)
    assert registry.ok("GET", "/subjects/s/versions") == [2]
    assert registry.ok("GET", "/subjects/s/versions?deleted=true") == [1, 2]
    assert registry.ok("GET", "/subjects/s/versions/1?deleted=true")["id"] == 1
    assert registry.error("GET", "/subjects/s/versions/1") == (404, 40402)
    assert registry.ok("DELETE", "/subjects/s/versions/1?permanent=true") == 1
    assert registry.ok("GET", "/subjects/s/versions?deleted=true") == [2]
    assert registry.error("GET", "/schemas/ids/1") == (404, 40403)
    # A subject: the same two steps.
    assert registry.error("DELETE", "/subjects/s?permanent=true") == (404, 40405)
    assert registry.ok("DELETE", "/subjects/s") == [2]
    assert registry.ok("GET", "/subjects") == []
    assert registry.ok("GET", "/subjects?deleted=true") == ["s"]
    assert registry.error("DELETE", "/subjects/s") == (404, 40404)
    assert registry.ok("GET", "/schemas/ids/2")["schema"]  # soft-deleted schemas stay readable by id
    assert registry.ok("DELETE", "/subjects/s?permanent=true") == [2]
    assert registry.ok("GET", "/subjects?deleted=true") == []
    assert registry.error("DELETE", "/subjects/s") == (404, 40401)
    # Ids are never reused: the next schema gets 3, not 1.
    assert registry.ok("POST", "/subjects/t/versions", {"schema": avro("Fresh")}) == {"id": 3}


def test_references_referencedby_and_a_referenced_subject_cannot_be_deleted(registry):
    address = json.dumps({"type": "record", "name": "Address", "namespace": "ex", "fields": [{"name": "city", "type": "string"}]})
    user = json.dumps({"type": "record", "name": "User", "namespace": "ex", "fields": [{"name": "home", "type": "ex.Address"}]})
    assert registry.ok("POST", "/subjects/address/versions", {"schema": address}) == {"id": 1}
    ref = [{"name": "ex.Address", "subject": "address", "version": 1}]
    assert registry.error("POST", "/subjects/user/versions", {"schema": user}) == (422, 42201)
    missing = [{"name": "ex.Address", "subject": "address", "version": 5}]
    assert registry.error("POST", "/subjects/user/versions", {"schema": user, "references": missing}) == (422, 42201)
    assert registry.ok("POST", "/subjects/user/versions", {"schema": user, "references": ref}) == {"id": 2}
    got = registry.ok("GET", "/subjects/user/versions/1")
    assert got["references"] == ref
    assert registry.ok("GET", "/schemas/ids/2")["references"] == ref
    assert registry.ok("GET", "/subjects/address/versions/1/referencedby") == [2]
    assert registry.error("DELETE", "/subjects/address") == (422, 42206)
    assert registry.error("DELETE", "/subjects/address/versions/1") == (422, 42206)
    assert registry.ok("GET", "/subjects/address/versions") == [1]
    # Once the referencing subject is gone, the referenced one may go.
    registry.ok("DELETE", "/subjects/user")
    assert registry.ok("DELETE", "/subjects/address") == [1]


def test_modes_readonly_and_import_with_given_ids(registry):
    assert registry.ok("GET", "/mode") == {"mode": "READWRITE"}
    registry.ok("POST", "/subjects/s/versions", {"schema": V1})
    assert registry.ok("PUT", "/mode/s", {"mode": "READONLY"}) == {"mode": "READONLY"}
    assert registry.ok("GET", "/mode/s") == {"mode": "READONLY"}
    assert registry.error("POST", "/subjects/s/versions", {"schema": V2}) == (422, 42205)
    assert registry.error("DELETE", "/subjects/s") == (422, 42205)
    assert registry.ok("POST", "/subjects/other/versions", {"schema": V2}) == {"id": 2}
    assert registry.ok("DELETE", "/mode/s") == {"mode": "READONLY"}
    assert registry.error("GET", "/mode/s") == (404, 40409)
    assert registry.ok("GET", "/mode/s?defaultToGlobal=true") == {"mode": "READWRITE"}
    # An id is only taken as given in IMPORT mode, which needs an empty registry or force.
    assert registry.error("POST", "/subjects/imported/versions", {"schema": avro("Imp"), "id": 100}) == (422, 42205)
    assert registry.error("PUT", "/mode", {"mode": "IMPORT"}) == (422, 42205)
    assert registry.ok("PUT", "/mode?force=true", {"mode": "IMPORT"}) == {"mode": "IMPORT"}
    assert registry.ok("POST", "/subjects/imported/versions", {"schema": avro("Imp"), "id": 100, "version": 7}) == {"id": 100}
    assert registry.ok("GET", "/subjects/imported/versions/7")["id"] == 100
    assert registry.error("POST", "/subjects/x/versions", {"schema": avro("Clash"), "id": 100}) == (422, 42205)
    registry.ok("PUT", "/mode", {"mode": "READWRITE"})
    # After an import, new ids continue above the highest one.
    assert registry.ok("POST", "/subjects/after/versions", {"schema": avro("After")}) == {"id": 101}


def test_normalize_registers_the_same_schema_spelled_differently_once(registry):
    a = '{"type": "record", "name": "U", "namespace": "n", "fields": [{"name": "x", "type": {"type": "int"}}]}'
    b = '{"fields":[{"type":"int","name":"x"}],"name":"n.U","type":"record"}'
    first = registry.ok("POST", "/subjects/s/versions?normalize=true", {"schema": a})
    assert registry.ok("POST", "/subjects/s/versions?normalize=true", {"schema": b}) == first
    assert registry.ok("GET", "/subjects/s/versions") == [1]
    assert registry.ok("POST", "/subjects/s?normalize=true", {"schema": b})["version"] == 1


def test_a_restart_reads_everything_back(registry_factory):
    first = registry_factory()
    first.ok("POST", "/subjects/a/versions", {"schema": V1})
    first.ok("POST", "/subjects/a/versions", {"schema": V2})
    first.ok("PUT", "/config/a", {"compatibility": "FULL"})
    first.ok("DELETE", "/subjects/a/versions/1")
    first.ok("POST", "/subjects/b/versions", {"schema": avro("B")})
    first.stop()
    second = registry_factory()
    assert second.ok("GET", "/subjects") == ["a", "b"]
    assert second.ok("GET", "/subjects/a/versions") == [2]
    assert second.ok("GET", "/subjects/a/versions?deleted=true") == [1, 2]
    assert second.ok("GET", "/config/a") == {"compatibilityLevel": "FULL"}
    assert second.ok("GET", "/subjects/b/versions/1")["id"] == 3
    assert second.ok("POST", "/subjects/c/versions", {"schema": avro("C")}) == {"id": 4}


def test_metrics_count_requests_by_endpoint_and_status_and_show_the_leader(registry):
    registry.ok("POST", "/subjects/s/versions", {"schema": V1})
    registry.ok("GET", "/subjects/s/versions/1")
    registry.error("GET", "/subjects/s/versions/9")
    text = requests.get(f"{registry.url}/metrics", timeout=30).text
    assert 'odradek_schema_registry_requests_total{endpoint="/subjects/{subject}/versions",method="POST",status="200"} 1.0' in text
    assert 'endpoint="/subjects/{subject}/versions/{version}",method="GET",status="404"} 1.0' in text
    assert "kafka_schema_registry_registered_count 1.0" in text
    assert "odradek_schema_registry_schemas 1.0" in text
    assert "kafka_schema_registry_master_slave_role 1.0" in text  # the only instance leads
    assert 'odradek_schema_registry_request_seconds_bucket{endpoint="/subjects/{subject}/versions/{version}"' in text
