"""`odradek schema-registry` as a user runs it: bad settings refused at start, unreachable brokers
answered with 50001 (never a partial view) until they can be read."""

from __future__ import annotations

import subprocess
import sys

import pytest
import requests
from registry_support import RegistryProcess
from support import wait_until

from odradek.schema_registry.registry_config import RegistryConfigError, from_properties
from odradek.testing.process import free_port, wait_for_port

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="b";'


def run_registry(*overrides: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "odradek", "schema-registry"]
    for item in overrides:
        cmd += ["--override", item]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_bad_settings_stop_the_start_with_one_line_naming_the_key():
    for settings, named in [
        ((), "kafkastore.bootstrap.servers"),
        (("kafkastore.bootstrap.servers=127.0.0.1:9092", "schema.compatibility.level=sideways"), "schema.compatibility.level"),
        (("kafkastore.bootstrap.servers=127.0.0.1:9092", "listeners=ftp://0.0.0.0:8081"), "listeners"),
        (("kafkastore.bootstrap.servers=127.0.0.1:9092", "kafkastore.no.such.option=1"), "no.such.option"),
        (("kafkastore.bootstrap.servers=127.0.0.1:9092", "leader.eligibility=maybe"), "leader.eligibility"),
    ]:  # fmt: skip
        done = run_registry(*settings)
        assert done.returncode == 1, settings
        assert named in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_security_settings_that_cannot_work_are_refused_naming_the_key():
    base = {"kafkastore.bootstrap.servers": "127.0.0.1:9092"}
    for settings, named in [
        ({"listeners": "https://0.0.0.0:8081"}, "ssl.keystore.location"),
        ({"listeners": "https://0.0.0.0:8081", "ssl.keystore.location": "/x.jks", "ssl.keystore.type": "JKS"}, "ssl.keystore.type"),
        ({"authentication.method": "BASIC"}, "kafkastore.security.protocol"),
        ({"authentication.method": "KERBEROS"}, "authentication.method"),
        ({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}, "authentication.method=BASIC"),
        ({"kafkastore.topic.replication.factor": "0"}, "kafkastore.topic.replication.factor"),
        ({"authentication.method": "BASIC", "kafkastore.security.protocol": "SASL_PLAINTEXT",
          "kafkastore.sasl.jaas.config": JAAS, "super.users": "alice"}, "super.users"),
    ]:  # fmt: skip
        with pytest.raises(RegistryConfigError) as refused:
            from_properties({**base, **settings})
        assert named in str(refused.value), (settings, str(refused.value))
    assert from_properties({**base, "kafkastore.topic.replication.factor": "2"}).topic_replication_factor == 2
    assert from_properties(base).topic_replication_factor == 3, "Confluent's default"


def test_until_the_brokers_can_be_read_requests_get_50001_then_answers(broker, tmp_path):
    dead = free_port()
    proc = RegistryProcess(f"127.0.0.1:{dead}", tmp_path / "registry.log", "_schemas-unreachable")
    cmd = [sys.executable, "-m", "odradek", "schema-registry"]
    for key, value in proc.settings.items():
        cmd += ["--override", f"{key}={value}"]
    proc.proc = subprocess.Popen(cmd, stdout=open(proc.log_path, "wb"), stderr=subprocess.STDOUT)
    try:
        wait_for_port("127.0.0.1", proc.port, 60, proc.proc)
        resp = requests.get(f"{proc.url}/subjects", timeout=10)
        assert (resp.status_code, resp.json()["error_code"]) == (500, 50001)
        assert "not read its schemas topic" in resp.json()["message"]
        assert requests.get(f"{proc.url}/metrics", timeout=10).status_code == 200
        wait_until(lambda: "retrying" in proc.log_text(), 30, "the registry to say it retries")
        assert proc.proc.poll() is None, "the registry keeps running"
    finally:
        proc.stop()
    assert "Traceback" not in proc.log_text()
