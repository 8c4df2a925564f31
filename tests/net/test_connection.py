"""The shared asyncio connection (odradek.net) against a real broker, and its benchmark's short run."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from odradek.net.connection import Connection
from odradek.protocol import api_keys

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "connection_bench.py"


def test_pipelined_requests_resolve_in_order_and_versions_are_negotiated(broker):
    async def main():
        conn = Connection(broker.host, broker.port, -1, "net-test", 10_000)
        await conn.connect(10)
        try:
            assert conn.version(api_keys.METADATA) >= 9 and conn.supports(api_keys.PRODUCE)
            futures = [conn.send(api_keys.METADATA, {"topics": None}) for _ in range(50)]
            assert conn.in_flight == 50
            answers = await asyncio.gather(*futures)
            assert {a.cluster_id for a in answers} == {answers[0].cluster_id} and answers[0].cluster_id
            assert conn.in_flight == 0
        finally:
            conn.close()
        assert conn.closed
        late = conn.send(api_keys.METADATA, {"topics": None})
        assert isinstance(late.exception(), ConnectionError)

    asyncio.run(main())


def test_connection_bench_short_run():
    done = subprocess.run(
        [sys.executable, str(BENCH), "--requests", "300", "--runs", "1"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| send (build, frame, correlate, time) |" in done.stdout
    assert "| receive (cut, decode, match, resolve) |" in done.stdout
