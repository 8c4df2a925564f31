"""`odradek configs`, `offsets`, `cluster`: output and effect, checked with confluent-kafka."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import termios
import time

from cli_helpers import ck_produce, run_odradek
from confluent_kafka.admin import ConfigResource, ResourceType


def test_configs_describe_and_alter_topic(odradek, ck_admin, topic_name):
    assert odradek("topics", "create", topic_name, "--config", "retention.ms=999000").code == 0
    r = odradek("configs", "describe", "--entity-type", "topics", "--entity-name", topic_name)
    assert r.code == 0, r
    assert r.lines()[0] == f"Configs set on topic '{topic_name}':"
    assert ["retention.ms", "999000", "DYNAMIC_TOPIC_CONFIG"] in [line.split() for line in r.lines()]
    every = odradek("configs", "describe", "topics", topic_name, "--all", "-o", "json").json()
    names = {c["name"]: c for c in every[0]["configs"]}
    assert (
        names["cleanup.policy"]["value"] == "delete" and names["cleanup.policy"]["source"] == "DEFAULT_CONFIG"
    )

    alter = odradek(
        "configs",
        "alter",
        "--topic",
        topic_name,
        "--add-config",
        "cleanup.policy=[compact,delete],segment.ms=600000",
    )
    assert alter.code == 0, alter
    assert alter.out.strip() == f"Completed updating config for topic {topic_name}."
    res = ConfigResource(ResourceType.TOPIC, topic_name)
    got = ck_admin.describe_configs([res])[res].result(10)
    assert got["cleanup.policy"].value == "compact,delete"
    assert got["segment.ms"].value == "600000"
    assert got["retention.ms"].value == "999000"  # incremental: untouched

    delete = odradek(
        "configs",
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        topic_name,
        "--delete-config",
        "segment.ms,retention.ms",
    )
    assert delete.code == 0, delete
    got = ck_admin.describe_configs([res])[res].result(10)
    assert got["segment.ms"].is_default and got["retention.ms"].is_default

    invalid = odradek("configs", "alter", "--topic", topic_name, "--add-config", "retention.ms=abc")
    assert invalid.code == 1 and "retention.ms" in invalid.err
    nothing = odradek("configs", "alter", "--topic", topic_name)
    assert nothing.code == 2 and "--add-config" in nothing.err


def test_a_large_answer_reaches_a_slow_reader_whole(broker):
    """Run unbuffered (PYTHONUNBUFFERED=1, as in many containers) into a pipe that the reader
    lets fill up: the JSON (over 64 KiB) must still arrive whole, not cut at the pipe's size."""
    cmd = [sys.executable, "-m", "odradek", "configs", "describe", "--broker", "0", "--all", "-o", "json"]
    cmd += ["--bootstrap-server", broker.bootstrap_servers]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as proc:
        deadline = time.monotonic() + 60
        queued = bytearray(4)
        while proc.poll() is None and time.monotonic() < deadline:
            fcntl.ioctl(proc.stdout.fileno(), termios.FIONREAD, queued)
            if int.from_bytes(queued, sys.byteorder) >= 65536:
                break  # the pipe is full: the writer has to wait for us
            time.sleep(0.05)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    configs = json.loads(out)[0]["configs"]
    assert len(out) > 65536 and any(c["name"] == "num.partitions" for c in configs)


def test_configs_brokers(odradek):
    r = odradek("configs", "describe", "--broker", "0", "--all", "-o", "json")
    assert r.code == 0, r
    configs = {c["name"]: c for c in r.json()[0]["configs"]}
    assert configs["num.partitions"]["value"] == "1"
    # Keys Odradek accepts without effect are marked, in JSON and in the table.
    assert configs["num.partitions"]["effect"] and not configs["num.io.threads"]["effect"]
    assert "no effect in Odradek" in configs["log.preallocate"]["documentation"]
    table = odradek("configs", "describe", "--broker", "0", "--all")
    rows = {line.split()[0]: line for line in table.lines()[1:] if line.strip()}
    assert rows["num.io.threads"].endswith("no effect in Odradek"), rows["num.io.threads"]
    assert "no effect" not in rows["num.partitions"]
    refused = odradek(
        "configs",
        "alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        "0",
        "--add-config",
        "log.dirs=/elsewhere",
    )
    assert refused.code == 1, refused
    assert "Cannot update these configs dynamically: log.dirs" in refused.err
    assert "INVALID_REQUEST" in refused.err and "server.properties" in refused.err
    assert "ConfigResource(" not in refused.err


def test_configs_alter_brokers_dynamically(own_broker):
    """Per-broker and cluster-wide dynamic configs through the command, on a broker of its own."""
    broker = own_broker()

    def odradek(*args):
        return run_odradek(*args, "--bootstrap-server", broker.bootstrap_servers)

    default = odradek(
        "configs", "alter", "--entity-type", "brokers", "--entity-default", "--add-config", "log.retention.ms=7200000"
    )
    assert default.code == 0, default
    assert default.out.strip() == "Completed updating default config for brokers in the cluster."
    mine = odradek("configs", "alter", "--broker", "0", "--add-config", "message.max.bytes=2000000")
    assert mine.code == 0, mine

    shown = odradek("configs", "describe", "--entity-type", "brokers", "--entity-default")
    assert shown.lines()[0] == "Cluster-wide default configs for brokers:"
    assert ["log.retention.ms", "7200000", "DYNAMIC_DEFAULT_BROKER_CONFIG"] in [line.split() for line in shown.lines()]
    rows = odradek("configs", "describe", "--broker", "0", "-o", "json").json()[0]["configs"]
    by_name = {c["name"]: c for c in rows}
    assert (by_name["message.max.bytes"]["value"], by_name["message.max.bytes"]["source"]) == (
        "2000000",
        "DYNAMIC_BROKER_CONFIG",
    )
    assert by_name["log.retention.ms"]["source"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"
    assert by_name["message.max.bytes"]["read_only"] is False

    back = odradek("configs", "alter", "--broker", "0", "--delete-config", "message.max.bytes")
    assert back.code == 0, back
    rows = odradek("configs", "describe", "--broker", "0", "--all", "-o", "json").json()[0]["configs"]
    by_name = {c["name"]: c for c in rows}
    assert (by_name["message.max.bytes"]["value"], by_name["message.max.bytes"]["source"]) == (
        "1048588",
        "DEFAULT_CONFIG",
    )
    bad = odradek("configs", "alter", "--entity-default", "--add-config", "num.io.threads=100")
    assert bad.code == 1 and "double the current value 8" in bad.err
    wrong = odradek("configs", "alter", "--topic", "x", "--entity-default", "--add-config", "a=1")
    assert wrong.code == 2 and "--entity-default" in wrong.err


def test_offsets_latest_earliest_and_by_time(odradek, broker, topic_name):
    assert odradek("topics", "create", topic_name, "-p", "2").code == 0
    ck_produce(broker.bootstrap_servers, topic_name, [(None, b"x")] * 3, partition=0)
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    ck_produce(broker.bootstrap_servers, topic_name, [(None, b"y")], partition=0)
    r = odradek("offsets", topic_name)
    assert r.code == 0, r
    assert [line.split() for line in r.lines()] == [
        ["TOPIC", "PARTITION", "OFFSET", "LOG-START-OFFSET", "LOG-END-OFFSET"],
        [topic_name, "0", "4", "0", "4"],
        [topic_name, "1", "0", "0", "0"],
    ]
    earliest = odradek("offsets", "--topic", topic_name, "--time", "-2", "-o", "json").json()
    assert [e["offset"] for e in earliest] == [0, 0]
    by_time = odradek("offsets", topic_name, "--time", str(cut), "--partitions", "0", "-o", "json").json()
    assert [(e["partition"], e["offset"]) for e in by_time] == [(0, 3)]
    none = odradek("offsets", topic_name, "--time", str(cut), "--partitions", "1")
    assert none.code == 0 and "no record at or after" in none.err


def test_cluster_matches_confluent_metadata(odradek, ck_admin, broker):
    r = odradek("cluster", "-o", "json")
    assert r.code == 0, r
    data = r.json()
    md = ck_admin.list_topics(timeout=10)
    assert data["cluster_id"] == md.cluster_id
    assert data["controller_id"] == md.controller_id == 0
    assert data["brokers"] == [{"id": 0, "host": "127.0.0.1", "port": broker.port, "rack": None}]
    text = odradek("cluster", "--api-versions")
    assert text.code == 0, text
    assert f"Cluster id: {md.cluster_id}" in text.out
    assert "produce" in text.out and "fetch" in text.out


def test_log_dirs_describe(own_broker, tmp_path, topic_name):
    """`odradek log-dirs describe` lists each log dir with its partitions, as kafka-log-dirs.sh."""
    dirs = [tmp_path / "d0", tmp_path / "d1"]
    broker = own_broker(**{"log.dirs": ",".join(str(d) for d in dirs)})

    def odradek(*args):
        return run_odradek(*args, "--bootstrap-server", broker.bootstrap_servers)

    assert odradek("topics", "create", topic_name, "-p", "2").code == 0
    ck_produce(broker.bootstrap_servers, topic_name, [(None, b"x" * 100)] * 3, partition=0)
    r = odradek("log-dirs", "describe", "--topic-list", topic_name, "-o", "json")
    assert r.code == 0, r
    (only,) = r.json()["brokers"]
    assert only["broker"] == 0
    by_dir = {d["logDir"]: d for d in only["logDirs"]}
    assert sorted(by_dir) == sorted(str(d) for d in dirs)
    placed = {p["partition"]: (d, p) for d, info in by_dir.items() for p in info["partitions"]}
    assert sorted(placed) == [f"{topic_name}-0", f"{topic_name}-1"]
    assert placed[f"{topic_name}-0"][0] != placed[f"{topic_name}-1"][0]  # spread over the dirs
    assert placed[f"{topic_name}-0"][1]["size"] > 300 and placed[f"{topic_name}-0"][1]["offsetLag"] == 0
    table = odradek("log-dirs", "describe")
    assert table.code == 0 and f"{topic_name}-0" in table.out and "LOG-DIR" in table.out
