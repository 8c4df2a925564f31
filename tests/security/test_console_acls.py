"""The console's actions obey the broker's ACLs: it acts as User:ANONYMOUS (HTTP carries no
Kafka credentials), refused actions answer 403 saying how to allow them, and allowed ones
change the broker as they do without an authorizer."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from confluent_kafka.admin import AclOperation, AdminClient, ResourceType
from test_acls import acl_broker_settings, allow, conf


def _post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_console_actions_are_refused_without_an_acl_and_done_with_one(secured_broker):
    b = secured_broker(acl_broker_settings(**{"http.listeners": "http://127.0.0.1:0"}))
    url = b.embedded.http_url

    status, answer = _post(f"{url}/v1/topics", {"name": "from-console", "partitions": 1})
    assert status == 403
    assert "User:ANONYMOUS" in answer["error"] and "odradek acls add" in answer["error"], answer

    allow(b, "User:ANONYMOUS", AclOperation.CREATE, ResourceType.TOPIC, "from-console")
    status, answer = _post(f"{url}/v1/topics", {"name": "from-console", "partitions": 2})
    assert status == 201, answer
    admin = AdminClient(conf(b, "admin"))
    assert len(admin.list_topics(timeout=10).topics["from-console"].partitions) == 2

    status, answer = _post(f"{url}/v1/topics/from-console/delete-records", {"partitions": {"0": 0}})
    assert status == 403 and "delete the topic 'from-console'" in answer["error"], answer
    allow(b, "User:ANONYMOUS", AclOperation.DELETE, ResourceType.TOPIC, "from-console")
    status, answer = _post(f"{url}/v1/topics/from-console/delete-records", {"partitions": {"0": 0}})
    assert status == 200 and answer["partitions"]["0"] == {"low_watermark": 0}, answer
