"""The chaos test, short: a real ZooKeeper and three broker processes, RF=3 with
min.insync.replicas=2, producers and a consumer group running while a few faults (kill -9 of a
leader, SIGSTOP/SIGCONT of a leader, kill -9 of the controller) hit the cluster. The long run
is ``benchmarks/chaos.py --faults 50``; the harness and checker are tests/cluster/chaos_support.py."""

from __future__ import annotations

from tests.cluster.chaos_support import format_table, run_chaos

FAST = {"zookeeper.session.timeout.ms": 3000, "replica.lag.time.max.ms": 3000}


def test_acknowledged_records_survive_leader_and_controller_failures(tmp_path):
    result = run_chaos(tmp_path, faults=3, partitions=2, writers=1, seed=7, overrides=FAST, log=lambda line: None)
    table = format_table(result.rows, result.stats)
    if not result.ok:
        result.history.dump(tmp_path / "history.jsonl")
    assert result.ok, f"\n{table}\nhistory and broker logs in {tmp_path}"
    assert len(result.history.of("ack")) > 1000, table
    assert sum(result.stats["faults"].values()) == 3
