"""The short run of the network fuzzer (benchmarks/fuzz_broker.py): 2,000 mutations of real
clients' requests against a live broker, beside a confluent-kafka producer and consumer.
The full run (100,000 frames, a table) is ``python benchmarks/fuzz_broker.py``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "fuzz_broker.py"


def test_two_thousand_mutated_frames_neither_crash_nor_disturb_a_good_client(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--frames", "2000", "--json", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["frames"] == 2000
    assert result["broker_crashes"] == 0 and result["broker_stalls"] == 0, result
    assert result["hung"] == 0, f"connections that neither got an answer nor were closed: {result}"
    assert result["handler_errors"] == 0, result["handler_error_kinds"]
    assert result["wrong_correlation"] == 0
    assert result["good_errors"] == 0, result["good_error_samples"]
    assert result["good_acked"] > 0 and result["good_consumed"] == result["good_acked"]
