"""``odradek console``: the same API for a cluster read through the Kafka protocol."""

from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from http_helpers import create_topic, get_json, post_json, scrape, series, wait_serving, wait_until

from odradek.testing.process import BrokerProcess, free_port


def start_console(bootstrap: str, log_path, *extra: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "odradek", "console", "-b", bootstrap, "--listen", url, *extra],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_serving(url)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, url


def stop(proc: subprocess.Popen) -> int:
    proc.terminate()
    return proc.wait(30)


@pytest.fixture(scope="module")
def console(http_broker, tmp_path_factory):
    proc, url = start_console(http_broker.bootstrap_servers, tmp_path_factory.mktemp("console") / "console.log")
    yield url
    assert stop(proc) == 0


def test_the_remote_console_shows_what_the_broker_shows(http_broker, console, topic_name):
    group = f"g-{topic_name}"
    create_topic(http_broker, topic_name, 2)
    p = Producer({"bootstrap.servers": http_broker.bootstrap_servers, "linger.ms": 5})
    for i in range(30):
        p.produce(topic_name, value=b"value-%d" % i, key=b"k%d" % i, partition=i % 2)
    assert p.flush(15) == 0
    c = Consumer({"bootstrap.servers": http_broker.bootstrap_servers, "group.id": group})
    c.commit(offsets=[TopicPartition(topic_name, 0, 3), TopicPartition(topic_name, 1, 15)], asynchronous=False)
    c.close()

    cluster = get_json(console, "/v1/cluster")
    local = get_json(http_broker.http_url, "/v1/cluster")
    assert cluster["source"] == "remote" and cluster["io"] is None
    for key in ("cluster_id", "controller_id", "brokers", "partitions", "under_replicated", "offline"):
        assert cluster[key] == local[key], key

    remote_topic = get_json(console, f"/v1/topics/{topic_name}")
    assert [(p["partition"], p["log_start"], p["high_watermark"]) for p in remote_topic["partitions"]] == [
        (0, 0, 15),
        (1, 0, 15),
    ]
    assert {c["name"] for c in remote_topic["configs"]} >= {"retention.ms", "cleanup.policy"}

    path = f"/v1/topics/{topic_name}/messages?partition=1&offset=4&limit=5"
    remote_page, local_page = get_json(console, path), get_json(http_broker.http_url, path)
    assert remote_page["records"] == local_page["records"]
    assert [r["offset"] for r in remote_page["records"]] == [4, 5, 6, 7, 8]

    remote_group = get_json(console, f"/v1/groups/{group}")
    assert remote_group["lag"] == 12
    assert remote_group["offsets"] == get_json(http_broker.http_url, f"/v1/groups/{group}")["offsets"]

    ours = series(scrape(console), "kafka_consumergroup_lag")
    theirs = series(scrape(http_broker.http_url), "kafka_consumergroup_lag")
    mine = {k: v for k, v in ours.items() if ("consumergroup", group) in k}
    assert mine and mine == {k: v for k, v in theirs.items() if ("consumergroup", group) in k}


def test_remote_actions(http_broker, console, topic_name):
    created = post_json(console, "/v1/topics", {"name": topic_name, "partitions": 1}, expect=201)
    assert created["partitions"] == 1
    p = Producer({"bootstrap.servers": http_broker.bootstrap_servers})
    for i in range(8):
        p.produce(topic_name, value=b"%d" % i)
    assert p.flush(15) == 0
    deleted = post_json(console, f"/v1/topics/{topic_name}/delete-records", {"partitions": {"0": 3}})
    assert deleted["partitions"]["0"] == {"low_watermark": 3}
    reset = post_json(console, f"/v1/groups/g-{topic_name}/reset-offsets", {"topic": topic_name, "to": "latest"})
    assert reset["offsets"] == {"0": 8}
    assert get_json(http_broker.http_url, f"/v1/groups/g-{topic_name}")["offsets"][0]["committed"] == 8


def test_a_cluster_that_goes_away_makes_the_console_say_so(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    proc, url = start_console(broker.bootstrap_servers, tmp_path / "console.log")
    try:
        assert get_json(url, "/readyz")["status"] == "ready"
        broker.stop()
        body = wait_until(
            lambda: (r := get_json(url, "/readyz", expect=503)) and r, message="/readyz to report the cluster gone"
        )
        assert f"the cluster at {broker.bootstrap_servers} does not answer" in body["reasons"][0]
        gone = get_json(url, "/v1/topics", expect=503, timeout=30)  # after the client's 5 s timeout
        assert f"the cluster at {broker.bootstrap_servers} did not answer" in gone["error"]
        assert get_json(url, "/healthz")["status"] == "ok"
    finally:
        stop(proc)
        broker.kill()


def test_console_help_teaches(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "odradek", "console", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--listen" in out and "odradek console -b kafka1:9092" in out
    refused = subprocess.run(
        [sys.executable, "-m", "odradek", "console", "--listen", "ftp://x"], capture_output=True, text=True
    )
    assert refused.returncode == 2 and "expected http://HOST:PORT" in refused.stderr
