"""The cluster commands as a user runs them: ``odradek cluster up`` (Ctrl-C stops it all),
``odradek cluster``, ``odradek reassign`` and ``odradek leader-election`` against a real
cluster, and the ``odradek_cluster`` pytest fixture."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

from odradek.testing.process import free_port
from tests.cluster.control_support import cluster_on


def odradek(*args, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "odradek", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def _free_block(n: int) -> int:
    """A first port with ``n`` free ports in a row."""
    for _ in range(50):
        base = free_port()
        ok = True
        for port in range(base, base + n):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no block of free ports")


def test_cluster_up_starts_three_brokers_and_ctrl_c_stops_them_all(tmp_path):
    base, zk_port = _free_block(3), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "odradek", "cluster", "up", "--brokers", "3", "--port", str(base),
         "--zookeeper-port", str(zk_port), "--data-dir", str(tmp_path / "c"), "--racks", "a,b,c",
         # a registry beside each broker on a free port (not 8081, which another run may hold)
         "--override", "schema.registry.listeners=http://127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    lines = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, f"cluster up ended early: {lines}"
            lines.append(line.rstrip())
            if "Ctrl-C stops the cluster" in line:
                break
        broker_lines = [line for line in lines if line.startswith("broker ")]
        assert [line.split()[1] for line in broker_lines] == ["1", "2", "3"]
        assert f"127.0.0.1:{base + 2}" in broker_lines[2] and "rack c" in broker_lines[2]
        shown = odradek("cluster", "-b", f"127.0.0.1:{base}", "-o", "json")
        assert shown.returncode == 0, shown.stderr
        info = json.loads(shown.stdout)
        assert sorted((b["id"], b["rack"]) for b in info["brokers"]) == [(1, "a"), (2, "b"), (3, "c")]
        assert info["controller_id"] in (1, 2, 3)
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    stopped = [line for line in out.splitlines() if "stopped" in line]
    assert stopped == [f"broker {i} stopped (exit code 0)" for i in (1, 2, 3)] + ["zookeeper stopped"]


def test_reassign_generate_execute_verify_and_leader_election(zookeeper, tmp_path):
    with cluster_on(zookeeper, 3) as cluster:
        boot = cluster.bootstrap_servers
        cluster.create_topic("plans", partitions=2, replication_factor=2)
        generated = odradek("reassign", "generate", "--topics", "plans", "--brokers", "1,2", "-b", boot)
        assert generated.returncode == 0, generated.stderr
        plan = json.loads(generated.stdout)
        assert {p["partition"] for p in plan["partitions"]} == {0, 1}
        assert all(sorted(p["replicas"]) == [1, 2] for p in plan["partitions"])
        # a plan that only reorders replicas completes at once (no data has to move)
        md = cluster.metadata(["plans"]).topics["plans"]
        reorder = {"version": 1, "partitions": [{"topic": "plans", "partition": p, "replicas": list(reversed(v.replicas))} for p, v in md.items()]}
        path = tmp_path / "plan.json"
        path.write_text(json.dumps(reorder))
        executed = odradek("reassign", "execute", path, "-b", boot)
        assert executed.returncode == 0, executed.stderr
        assert "Current partition replica assignment" in executed.stdout
        verified = odradek("reassign", "verify", path, "-b", boot, "-o", "json")
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert {row["status"] for row in json.loads(verified.stdout)} == {"completed"}
        elected = odradek("leader-election", "--election-type", "preferred", "--topic", "plans", "-b", boot, "-o", "json")
        assert elected.returncode == 0, elected.stderr
        assert {row["result"] for row in json.loads(elected.stdout)} == {"elected"}
        after = cluster.metadata(["plans"]).topics["plans"]
        assert all(v.leader == v.replicas[0] for v in after.values())
        again = odradek("leader-election", "--election-type", "preferred", "--all-topic-partitions", "-b", boot, "-o", "json")
        assert {row["result"] for row in json.loads(again.stdout) if row["partition"].startswith("plans-")} == {"not needed"}


def test_the_odradek_cluster_fixture_gives_a_running_cluster(odradek_cluster):
    md = odradek_cluster.metadata([])
    assert sorted(md.brokers) == [1, 2, 3] and md.controller_id in md.brokers
