"""`odradek server` serves a registry beside the broker (schema.registry.listeners)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import requests
from registry_support import CONTENT_TYPE, wait_until_ready

from odradek.testing.process import BrokerProcess, free_port

SCHEMA = json.dumps({"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]})


def test_the_broker_serves_a_registry_that_keeps_its_ids_over_a_restart(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    broker = BrokerProcess(tmp_path / "data", overrides={"schema.registry.listeners": url}).start()
    try:
        wait_until_ready(url, 60, broker.proc)
        post = requests.post(f"{url}/subjects/a-value/versions", json={"schema": SCHEMA},
                             headers={"Content-Type": CONTENT_TYPE}, timeout=30)  # fmt: skip
        assert post.json() == {"id": 1}
        broker.stop()
        broker.start()
        wait_until_ready(url, 60, broker.proc)
        assert requests.get(f"{url}/subjects/a-value/versions/1", timeout=30).json()["id"] == 1
    finally:
        broker.stop()
    assert "Traceback" not in broker.log_text()


def test_an_empty_key_turns_it_off_and_a_taken_port_stops_the_start_with_a_message(tmp_path):
    port = free_port()
    broker = BrokerProcess(tmp_path / "off", overrides={"schema.registry.listeners": ""}).start()
    try:
        assert "schema registry" not in broker.log_text()
    finally:
        broker.stop()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        kafka = free_port()
        done = subprocess.run(
            [sys.executable, "-m", "odradek", "server", "--override", f"log.dirs={tmp_path / 'taken'}",
             "--override", f"listeners=PLAINTEXT://127.0.0.1:{kafka}",
             "--override", "http.listeners=",
             "--override", f"schema.registry.listeners=http://127.0.0.1:{port}"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert "schema.registry.listeners" in last and "Traceback" not in done.stderr


def test_a_broker_killed_under_its_registry_loses_no_acknowledged_schema(tmp_path):
    """Every registration answered before a kill -9 of the broker (and the registry in its
    process) is there after the restart, with its id; new ids continue above them."""
    url = f"http://127.0.0.1:{free_port()}"
    broker = BrokerProcess(tmp_path / "data", overrides={"schema.registry.listeners": url}).start()
    headers = {"Content-Type": CONTENT_TYPE}
    try:
        wait_until_ready(url, 60, broker.proc)
        ids = {}
        with requests.Session() as session:
            for i in range(40):
                body = {"schema": json.dumps({"type": "record", "name": f"R{i}", "fields": [{"name": "x", "type": "int"}]})}
                ids[f"s{i}"] = session.post(f"{url}/subjects/s{i}/versions", json=body, headers=headers, timeout=30).json()["id"]
            session.put(f"{url}/config/s0", json={"compatibility": "NONE"}, headers=headers, timeout=30).raise_for_status()
        broker.kill()
        broker.start()
        wait_until_ready(url, 60, broker.proc)
        assert requests.get(f"{url}/subjects", timeout=30).json() == sorted(ids)
        for subject, schema_id in ids.items():
            assert requests.get(f"{url}/subjects/{subject}/versions/1", timeout=30).json()["id"] == schema_id
        assert requests.get(f"{url}/config/s0", timeout=30).json() == {"compatibilityLevel": "NONE"}
        fresh = requests.post(f"{url}/subjects/new/versions", json={"schema": SCHEMA}, headers=headers, timeout=30)
        assert fresh.json()["id"] == max(ids.values()) + 1
    finally:
        broker.stop()
