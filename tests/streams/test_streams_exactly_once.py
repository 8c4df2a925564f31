"""exactly_once_v2: `odradek streams run` (the driver) killed with SIGKILL while it works,
then restarted from the same state.dir: every input record's result is in the output once — none
lost, none twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter

import pytest
from pipeline_kafka import create_topic, produce, read_topic
from support import wait_until

pytestmark = pytest.mark.timeout(1200)

APP = """\
from odradek.streams import Serdes, StreamsBuilder

builder = StreamsBuilder()
builder.stream({source!r}).map_values(lambda v: v.upper()).to({target!r})
topology = builder.build()
config = {{"default.key.serde": Serdes.String(), "default.value.serde": Serdes.String()}}
"""


def _start(app, broker, state_dir, log):
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "odradek",
            "streams",
            "run",
            str(app),
            "-b",
            broker.bootstrap_servers,
            "--application-id",
            "eos-app",
            "--config",
            "processing.guarantee=exactly_once_v2",
            "--config",
            "commit.interval.ms=300",
            "--config",
            f"state.dir={state_dir}",
            "--config",
            "spark.python.authenticate.socketTimeout=120s",
            "--master",
            "local[2]",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def test_kill_9_and_restart_writes_each_result_once(broker, topic_name, tmp_path):
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(broker.bootstrap_servers, source, 2)
    create_topic(broker.bootstrap_servers, target, 2)
    app = tmp_path / "app.py"
    app.write_text(APP.format(source=source, target=target))
    state_dir = tmp_path / "state"

    def wave(start, count):
        produce(
            broker.bootstrap_servers,
            source,
            [{"key": b"k%d" % (i % 7), "value": b"record-%05d" % i} for i in range(start, start + count)],
        )

    wave(0, 300)
    with open(tmp_path / "run1.log", "wb") as log:
        first = _start(app, broker, state_dir, log)
        try:
            wait_until(
                lambda: read_topic(broker.bootstrap_servers, target) or first.poll() is not None,
                600,
                "output",
            )
            assert first.poll() is None, (tmp_path / "run1.log").read_text()
            wave(300, 300)  # more input while it runs; the kill lands in the middle of it
            # The driver dies; its JVM sees its stdin close and exits (PySpark's gateway rule),
            # possibly after tasks in flight wrote part of a micro-batch.
            os.kill(first.pid, signal.SIGKILL)
        finally:
            if first.poll() is None:
                os.kill(first.pid, signal.SIGKILL)
            first.wait(30)
    killed_at = len(read_topic(broker.bootstrap_servers, target))
    wave(600, 200)

    with open(tmp_path / "run2.log", "wb") as log:
        second = _start(app, broker, state_dir, log)
        try:
            wait_until(
                lambda: len(read_topic(broker.bootstrap_servers, target)) >= 800 or second.poll() is not None,
                600,
                "all 800 results",
            )
            assert second.poll() is None, (tmp_path / "run2.log").read_text()
        finally:
            second.send_signal(signal.SIGINT)
            try:
                second.wait(120)
            except subprocess.TimeoutExpired:
                os.kill(second.pid, signal.SIGKILL)
                second.wait(30)

    out = Counter((r.key, r.value) for r in read_topic(broker.bootstrap_servers, target))
    expected = Counter((b"k%d" % (i % 7), b"RECORD-%05d" % i) for i in range(800))
    duplicates = {k: n for k, n in out.items() if n > 1}
    assert not duplicates, f"written twice: {sorted(duplicates)[:5]} (killed with {killed_at} out)"
    assert out == expected
