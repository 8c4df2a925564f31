"""The JSON API and health checks of a broker: what they show, what the actions change,
and the clear refusals (bad input, unknown names, foreign pages, denied actions)."""

from __future__ import annotations

import base64

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from http_helpers import create_topic, get_json, post_json, request, wait_serving, wait_until

from odradek.testing import EmbeddedBroker


def produce(broker, topic: str, records) -> None:
    """``records``: (partition, key, value, headers, timestamp ms) tuples."""
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    for partition, key, val, headers, ts in records:
        p.produce(topic, value=val, key=key, partition=partition, headers=headers, timestamp=ts or 0)
    assert p.flush(15) == 0


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_health_and_readiness(http_broker):
    assert get_json(http_broker.http_url, "/healthz") == {"status": "ok", "source": "broker"}
    assert get_json(http_broker.http_url, "/readyz") == {"status": "ready"}


def test_readiness_names_what_is_still_loading():
    with EmbeddedBroker() as broker:
        wait_serving(broker.http_url)
        assert get_json(broker.http_url, "/readyz") == {"status": "ready"}
        broker.call(lambda b: b.transaction_coordinator.loading.add(3))  # as while partition 3 replays
        try:
            body = get_json(broker.http_url, "/readyz", expect=503)
            assert body["status"] == "not ready"
            assert body["reasons"] == ["the transaction coordinator is loading __transaction_state partitions 3"]
            assert get_json(broker.http_url, "/healthz")["status"] == "ok"  # alive all the same
        finally:
            broker.call(lambda b: b.transaction_coordinator.loading.discard(3))
        assert get_json(broker.http_url, "/readyz") == {"status": "ready"}


def test_topics_partitions_and_configs(http_broker, topic_name):
    create_topic(http_broker, topic_name, 3, {"retention.ms": "3600000"})
    produce(http_broker, topic_name, [(1, b"k", b"v" * 10, None, None)] * 7)

    listed = {t["name"]: t for t in get_json(http_broker.http_url, "/v1/topics")}
    row = listed[topic_name]
    assert (row["partitions"], row["replication_factor"], row["end_offset_sum"], row["internal"]) == (3, 1, 7, False)
    on_disk = sum(f.stat().st_size for f in http_broker.data_dir.glob(f"{topic_name}-*/*.log"))
    assert row["size"] == on_disk

    topic = get_json(http_broker.http_url, f"/v1/topics/{topic_name}")
    p1 = topic["partitions"][1]
    assert (p1["leader"], p1["replicas"], p1["isr"], p1["log_start"], p1["high_watermark"]) == (0, [0], [0], 0, 7)
    configs = {c["name"]: c for c in topic["configs"]}
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"]["is_default"] is True

    cluster = get_json(http_broker.http_url, "/v1/cluster")
    assert cluster["controller_id"] == 0
    assert [b["id"] for b in cluster["brokers"]] == [0]
    assert cluster["under_replicated"] == 0 and cluster["offline"] == 0
    assert cluster["io"]["messages_in"] >= 7
    (me,) = get_json(http_broker.http_url, "/v1/brokers")
    assert me["controller"] is True and me["local"]["log_dirs"] == [str(http_broker.data_dir)]
    assert any(c["name"] == "log.dirs" for c in get_json(http_broker.http_url, "/v1/brokers/0/configs"))


def test_message_browser_by_offset_timestamp_and_latest(http_broker, topic_name):
    create_topic(http_broker, topic_name)
    base = 1_700_000_000_000
    produce(
        http_broker,
        topic_name,
        [(0, b"key-%d" % i, b'{"n": %d}' % i, [("trace", b"t%d" % i)], base + i * 1000) for i in range(30)]
        + [(0, None, None, None, base + 30_000)],
    )
    path = f"/v1/topics/{topic_name}/messages?partition=0"

    page = get_json(http_broker.http_url, path + "&offset=10&limit=3")
    assert [r["offset"] for r in page["records"]] == [10, 11, 12]
    first = page["records"][0]
    assert (first["key"], first["value"], first["timestamp"]) == (b64(b"key-10"), b64(b'{"n": 10}'), base + 10_000)
    assert first["headers"] == [["trace", b64(b"t10")]]
    assert (page["next_offset"], page["high_watermark"], page["log_start"]) == (13, 31, 0)

    by_time = get_json(http_broker.http_url, path + f"&timestamp={base + 20_500}&limit=2")
    assert [r["offset"] for r in by_time["records"]] == [21, 22]

    latest = get_json(http_broker.http_url, path + "&limit=2")
    assert [r["offset"] for r in latest["records"]] == [29, 30]
    assert latest["records"][1]["key"] is None and latest["records"][1]["value"] is None


def test_group_lag_in_the_api(http_broker, topic_name):
    group = f"g-{topic_name}"
    create_topic(http_broker, topic_name, 2)
    produce(http_broker, topic_name, [(i % 2, None, b"x", None, None) for i in range(40)])
    c = Consumer({"bootstrap.servers": http_broker.bootstrap_servers, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic_name, 0, 5), TopicPartition(topic_name, 1, 20)], asynchronous=False)
    c.close()

    listed = {g["group_id"]: g for g in get_json(http_broker.http_url, "/v1/groups")}
    assert (listed[group]["lag"], listed[group]["partitions"], listed[group]["state"]) == (15, 2, "Empty")
    detail = get_json(http_broker.http_url, f"/v1/groups/{group}")
    assert [(o["partition"], o["committed"], o["end"], o["lag"]) for o in detail["offsets"]] == [
        (0, 5, 20, 15),
        (1, 20, 20, 0),
    ]


def test_a_consumer_protocol_groups_members_show_in_the_api(http_broker, topic_name):
    group = f"g848-{topic_name}"
    create_topic(http_broker, topic_name, 2)
    c = Consumer({"bootstrap.servers": http_broker.bootstrap_servers, "group.id": group,
                  "group.protocol": "consumer", "client.id": "kip848-member"})
    c.subscribe([topic_name])
    try:
        wait_until(lambda: c.poll(0.1) is None and len(c.assignment()) == 2, 20, message="the member's assignment")
        listed = {g["group_id"]: g for g in get_json(http_broker.http_url, "/v1/groups")}
        assert (listed[group]["members"], listed[group]["protocol_type"]) == (1, "consumer")
        detail = get_json(http_broker.http_url, f"/v1/groups/{group}")
        assert [(m["client_id"], m["assignment"]) for m in detail["members"]] == [
            ("kip848-member", [[topic_name, 0], [topic_name, 1]])
        ]
        assert detail["state"] == "Stable"
    finally:
        c.close()


def test_actions_create_delete_records_and_reset_offsets(http_broker, topic_name):
    created = post_json(
        http_broker.http_url,
        "/v1/topics",
        {"name": topic_name, "partitions": 2, "configs": {"retention.ms": "60000"}},
        expect=201,
    )
    assert created["partitions"] == 2
    assert get_json(http_broker.http_url, f"/v1/topics/{topic_name}")["partitions"][1]["partition"] == 1
    refused = post_json(http_broker.http_url, "/v1/topics", {"name": topic_name}, expect=400)
    assert "already exists" in refused["error"]

    produce(http_broker, topic_name, [(0, None, b"r%d" % i, None, None) for i in range(10)])
    result = post_json(http_broker.http_url, f"/v1/topics/{topic_name}/delete-records", {"partitions": {"0": 4}})
    assert result["partitions"]["0"] == {"low_watermark": 4}
    assert get_json(http_broker.http_url, f"/v1/topics/{topic_name}")["partitions"][0]["log_start"] == 4
    too_far = post_json(http_broker.http_url, f"/v1/topics/{topic_name}/delete-records", {"partitions": {"0": 99}})
    assert too_far["partitions"]["0"]["code"] == "OFFSET_OUT_OF_RANGE"

    group = f"g-{topic_name}"
    reset = post_json(http_broker.http_url, f"/v1/groups/{group}/reset-offsets", {"topic": topic_name, "to": "earliest"})
    assert reset["offsets"] == {"0": 4, "1": 0}
    reset = post_json(
        http_broker.http_url, f"/v1/groups/{group}/reset-offsets", {"topic": topic_name, "to": "offset", "value": 7}
    )
    assert reset["offsets"] == {"0": 7, "1": 0}
    c = Consumer({"bootstrap.servers": http_broker.bootstrap_servers, "group.id": group})
    committed = c.committed([TopicPartition(topic_name, 0)], timeout=10)
    c.close()
    assert committed[0].offset == 7

    internal = post_json(http_broker.http_url, "/v1/topics/__consumer_offsets/delete-records", {"partitions": {"0": -1}})
    assert internal["partitions"]["0"]["code"] == "INVALID_TOPIC_EXCEPTION"
    assert "coordinator's state" in internal["partitions"]["0"]["error"]


def test_resetting_offsets_on_a_fresh_broker_creates_the_offsets_topic():
    """As FindCoordinator does for a client: the console's reset must not fail with
    NOT_COORDINATOR because no group ever used the broker."""
    with EmbeddedBroker() as broker:
        wait_serving(broker.http_url)
        broker.create_topic("first")
        reset = post_json(broker.http_url, "/v1/groups/first-group/reset-offsets", {"topic": "first", "to": "latest"})
        assert reset["offsets"] == {"0": 0}
        assert get_json(broker.http_url, "/v1/groups/first-group")["offsets"][0]["committed"] == 0


def test_resetting_a_group_with_members_is_refused_with_the_reason(http_broker, topic_name):
    group = f"g-{topic_name}"
    create_topic(http_broker, topic_name)
    c = Consumer({"bootstrap.servers": http_broker.bootstrap_servers, "group.id": group, "session.timeout.ms": 6000})
    c.subscribe([topic_name])
    try:
        wait_until(lambda: c.poll(0.2) is None and c.assignment(), 30, message="the consumer to join")
        body = post_json(
            http_broker.http_url, f"/v1/groups/{group}/reset-offsets", {"topic": topic_name, "to": "latest"}, expect=409
        )
        assert "has active members; stop its consumers first" in body["error"]
    finally:
        c.close()


@pytest.mark.parametrize(
    ("path", "status", "phrase"),
    [
        ("/v1/topics/no-such-topic", 404, "does not exist"),
        ("/v1/topics/no-such-topic/messages", 404, "does not exist"),
        ("/v1/groups/no-such-group", 404, "does not exist"),
        ("/v1/topics/x/messages?partition=abc", 400, "partition must be an integer"),
        ("/v1/topics/x/messages?limit=100000", 400, "limit must be at most"),
        ("/v1/topics/x/messages?offset=1&timestamp=2", 400, "not both"),
        ("/v1/nothing", 404, "no such API"),
    ],
)
def test_bad_queries_get_a_clear_json_error(http_broker, path, status, phrase):
    body = get_json(http_broker.http_url, path, expect=status)
    assert phrase in body["error"]


def test_actions_refuse_foreign_pages_non_json_and_bad_bodies(http_broker, topic_name):
    url = http_broker.http_url
    status, _, body = request(url, "POST", "/v1/topics", body={"name": topic_name}, headers={"Origin": "http://evil.example"})
    assert status == 403 and b"only from this console" in body
    status, _, body = request(url, "POST", "/v1/topics", body=b"name=x", headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 415
    status, _, body = request(url, "POST", "/v1/topics", body=b"{not json", headers={"Content-Type": "application/json"})
    assert status == 400 and b"not valid JSON" in body
    status, _, body = request(url, "POST", "/v1/topics", body=b"[1]", headers={"Content-Type": "application/json"})
    assert status == 400
    post_json(url, "/v1/topics", {"name": topic_name, "partitions": "many"}, expect=400)
    post_json(url, f"/v1/groups/g-{topic_name}/reset-offsets", {"topic": topic_name, "to": "yesterday"}, expect=400)
    listed = {t["name"] for t in get_json(url, "/v1/topics")}
    assert topic_name not in listed  # nothing was created along the way


def test_denied_actions_are_refused_with_the_authorizers_message():
    def deny_deletes(principal, operation, resource_type, name):
        if operation == "DELETE":
            return f"{principal} may not delete records of topic {name!r} (ACL)"
        return None

    with EmbeddedBroker() as broker:
        wait_serving(broker.http_url)
        broker.create_topic("guarded")
        broker.call(lambda b: setattr(b.http.authorizer, "check_fn", deny_deletes))
        body = post_json(broker.http_url, "/v1/topics/guarded/delete-records", {"partitions": {"0": 0}}, expect=403)
        assert body["error"] == "User:ANONYMOUS may not delete records of topic 'guarded' (ACL)"
        post_json(broker.http_url, "/v1/topics", {"name": "allowed"}, expect=201)  # other actions pass


def test_no_http_listener_when_the_key_is_empty():
    with EmbeddedBroker(overrides={"http.listeners": ""}) as broker:
        assert broker.http_url is None
        assert broker.call(lambda b: b.http) is None


def test_the_http_port_in_use_fails_the_start_with_a_clear_message():
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(Exception) as failure:
            EmbeddedBroker(overrides={"http.listeners": f"http://127.0.0.1:{port}"}).start()
    message = str(failure.value.__cause__ or failure.value)
    assert f"http://127.0.0.1:{port} is already in use" in message
    assert "http.listeners=" in message
