"""Many registrations at once: the leader groups them into shared writes to the schemas
topic, yet each gets its own id (the same schema one id), and all of it is read back by
an instance started afterwards."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import requests
from registry_support import CONTENT_TYPE


def schema(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": "n", "type": "long"}]})


def register(url: str, subject: str, text: str) -> int:
    resp = requests.post(
        f"{url}/subjects/{subject}/versions", json={"schema": text}, headers={"Content-Type": CONTENT_TYPE}, timeout=60
    )
    assert resp.status_code == 200, f"{subject}: {resp.status_code} {resp.text}"
    return resp.json()["id"]


def test_200_concurrent_registrations_get_distinct_ids_that_survive_a_restart(registry_factory):
    first = registry_factory()
    distinct = [(f"c-{i}", schema(f"R{i}")) for i in range(200)]
    shared = [(f"shared-{i}", schema("Shared")) for i in range(20)]  # one schema in 20 subjects
    same_subject = [("one-subject", schema("Once"))] * 20  # one schema, one subject, 20 times
    jobs = distinct + shared + same_subject
    with ThreadPoolExecutor(max_workers=64) as pool:
        ids = list(pool.map(lambda job: register(first.url, *job), jobs))
    distinct_ids, shared_ids, same_subject_ids = ids[:200], ids[200:220], ids[220:]
    assert len(set(distinct_ids)) == 200, "every distinct schema has its own id"
    assert len(set(shared_ids)) == 1 and len(set(same_subject_ids)) == 1, "the same schema has one id"
    every_id = set(distinct_ids) | set(shared_ids) | set(same_subject_ids)
    assert len(every_id) == 202 and not set(shared_ids) & set(distinct_ids)
    assert first.ok("GET", "/subjects/one-subject/versions") == [1], "registered once: one version"

    first.stop()
    second = registry_factory()  # the same topic, read from the start
    for (subject, text), schema_id in zip(jobs, ids, strict=True):
        assert json.loads(second.ok("GET", f"/schemas/ids/{schema_id}")["schema"]) == json.loads(text)
        assert second.ok("GET", f"/subjects/{subject}/versions/latest")["id"] == schema_id
    new_id = register(second.url, "after-restart", schema("After"))
    assert new_id == max(every_id) + 1, "ids continue above every id handed out: none is reused"
