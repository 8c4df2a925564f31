"""`odradek connect standalone` refuses bad worker configs in one line and warns of unknown keys;
`odradek connectors` drives a worker's REST API (create from Kafka's properties file, list,
status, config, pause, resume, stop, offsets, restart, delete) and says what went wrong."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from connect_support import WorkerProcess, quickstart_worker, write_properties
from support import wait_until


def odradek(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "odradek", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"offset.flush.interval.ms": "soon"}, "offset.flush.interval.ms"),
        ({"offset.storage.file.filename": ""}, "offset.storage.file.filename"),
        ({"listeners": "ftp://127.0.0.1:1"}, "listeners"),
    ],
)
def test_an_invalid_worker_value_stops_the_start_with_one_line(tmp_path, changes, named):
    props = {**quickstart_worker("127.0.0.1:1", tmp_path), **changes}
    done = odradek("connect", "standalone", str(write_properties(tmp_path / "w.properties", props)))
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error")]
    assert len(errors) == 1 and named in errors[0] and "Traceback" not in done.stderr, done.stderr


def test_unknown_worker_keys_are_warned_by_name_and_the_cli_drives_the_worker(broker, tmp_path, topic_name):
    config = quickstart_worker(broker.bootstrap_servers, tmp_path, **{"no.such.worker.key": "1"})
    worker = WorkerProcess(tmp_path, config).start()
    try:
        wait_until(lambda: "no.such.worker.key" in worker.log_text(), 10, "the warning")
        assert "WARNING" in next(line for line in worker.log_text().splitlines() if "no.such.worker.key" in line)
        source = tmp_path / "in.txt"
        source.write_text("x\n")
        connector = write_properties(tmp_path / "connect-file-source.properties", {
            "name": "cli-source", "connector.class": "FileStreamSource", "tasks.max": "1",
            "file": str(source), "topic": topic_name})
        url = ["--url", worker.url]
        created = odradek("connectors", "create", str(connector), *url)
        assert created.returncode == 0, created.stderr
        assert json.loads(created.stdout)["name"] == "cli-source"
        assert odradek("connectors", "list", *url).stdout.split() == ["cli-source"]
        wait_until(lambda: "RUNNING\t0:RUNNING" in odradek("connectors", "list", "--status", *url).stdout, 30,
                   "the connector to run")
        assert json.loads(odradek("connectors", "config", "cli-source", *url).stdout)["topic"] == topic_name
        assert odradek("connectors", "pause", "cli-source", *url).returncode == 0
        assert json.loads(odradek("connectors", "status", "cli-source", *url).stdout)["connector"]["state"] == "PAUSED"
        assert odradek("connectors", "stop", "cli-source", *url).returncode == 0
        wait_until(lambda: json.loads(odradek("connectors", "offsets", "cli-source", *url).stdout)["offsets"], 30,
                   "the offsets")
        reset = odradek("connectors", "offsets", "cli-source", "--reset", *url)
        assert "reset successfully" in json.loads(reset.stdout)["message"]
        assert odradek("connectors", "resume", "cli-source", *url).returncode == 0
        assert odradek("connectors", "restart", "cli-source", *url).returncode == 0
        assert odradek("connectors", "delete", "cli-source", *url).returncode == 0
        missing = odradek("connectors", "status", "cli-source", *url)
        assert missing.returncode == 1 and "404: Connector cli-source not found" in missing.stderr
    finally:
        worker.kill()
    unreachable = odradek("connectors", "list", "--url", worker.url)
    assert unreachable.returncode == 1 and "cannot reach the Connect worker" in unreachable.stderr
