"""``odradek pipeline``: the generator, the list, and one pipeline run end to end."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner
from pipeline_kafka import create_topic, produce, read_topic

from odradek.pipeline.cli import pipeline

pytestmark = pytest.mark.timeout(240)


def test_list_names_the_four_pipelines():
    result = CliRunner().invoke(pipeline, ["list"])
    assert result.exit_code == 0, result.output
    assert [line.split()[0] for line in result.output.splitlines()] == [
        "page-views",
        "offline-load",
        "value-length",
        "page-views-by-region",
    ]


def test_generate_page_views(broker, topic_name):
    result = CliRunner().invoke(
        pipeline,
        ["generate", "page-views", "-b", broker.bootstrap_servers, "-t", topic_name, "--count", "120", "--rate", "0",
         "--seed", "3", "--pages", "7", "--partitions", "2"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "sent 120" in result.output
    records = read_topic(broker.bootstrap_servers, topic_name)
    assert len(records) == 120 and {r.partition for r in records} == {0, 1}
    events = [json.loads(r.value) for r in records]
    assert all(r.key == e["user"].encode() for r, e in zip(records, events, strict=True))
    assert {e["page"] for e in events} <= {f"/page/{i}" for i in range(7)}
    assert all(e["action"] == "view" and isinstance(e["ts"], int) for e in events)


def test_run_value_length_from_the_command_line(spark, broker, topic_name, tmp_path):
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(broker.bootstrap_servers, source, 1)
    produce(broker.bootstrap_servers, source, [{"key": b"k", "value": b"x" * i} for i in range(30)])
    # In this process the command uses the session the tests already have.
    result = CliRunner().invoke(
        pipeline,
        ["run", "value-length", "-b", broker.bootstrap_servers, "--input", source, "--output", target,
         "--checkpoint", str(tmp_path / "ckpt"), "--available-now"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert [r.value for r in read_topic(broker.bootstrap_servers, target)] == [
        str(i).encode() for i in range(30)
    ]
    assert not spark.sparkContext._jsc.sc().isStopped()


def test_bootstrap_server_is_spelled_like_every_other_command(broker, topic_name):
    help_text = CliRunner().invoke(pipeline, ["generate", "page-views", "--help"]).output
    assert "--bootstrap-server " in help_text and "--bootstrap-servers" not in help_text
    # The plural spelling of earlier versions still works.
    result = CliRunner().invoke(
        pipeline,
        ["generate", "page-views", "--bootstrap-servers", broker.bootstrap_servers, "-t", topic_name,
         "--count", "5", "--rate", "0"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert len(read_topic(broker.bootstrap_servers, topic_name)) == 5


def _odradek(*args, env=None, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "odradek", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        **kwargs,
    )


def test_run_without_java_says_so_in_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # no java there
    proc = subprocess.run(
        [sys.executable, "-m", "odradek", "pipeline", "run", "value-length", "-b", "127.0.0.1:1"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "Error: Spark needs Java 17 or newer and there is no java in PATH: install one "
        "(on Debian: apt-get install openjdk-17-jre-headless) or point JAVA_HOME at one"
    ]


def test_ctrl_c_stops_a_streaming_pipeline_quietly_after_the_batch(broker, topic_name, tmp_path):
    """Ctrl-C in a terminal (SIGINT to the foreground process group) on a running pipeline:
    it finishes the micro-batch, prints a summary and exits 130, with no Python, Py4J or
    Java trace."""
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(broker.bootstrap_servers, source, 1)
    produce(broker.bootstrap_servers, source, [{"key": b"k", "value": b"x" * i} for i in range(30)])
    proc = _odradek(
        "pipeline", "run", "value-length", "-b", broker.bootstrap_servers, "--input", source,
        "--output", target, "--checkpoint", str(tmp_path / "ckpt"), "--master", "local[1]",
        "--trigger", "1 second", "--conf", "spark.sql.shuffle.partitions=1",
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while len(read_topic(broker.bootstrap_servers, target)) < 30:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the pipeline wrote nothing"
            time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    for trace in ("Traceback", "py4j", "Py4J", "Exception", "\tat ", "KeyboardInterrupt"):
        assert trace not in err, err
    assert "value-length: stopping after the current micro-batch" in err
    assert re.fullmatch(
        rf"value-length: stopped; 30 rows in \d batch(es)?; [\d.]+ s \([\d,]+ rows/s\); output in {target}\n", out
    ), out
    assert [r.value for r in read_topic(broker.bootstrap_servers, target)] == [
        str(i).encode() for i in range(30)
    ]


@pytest.mark.timeout(480)
def test_a_query_that_fails_stops_the_pipeline_at_once_in_one_line(broker, topic_name, tmp_path):
    """page-views runs three queries; when one dies (here the top-N table's, whose topic
    refuses records over 64 bytes), the pipeline stops the others and exits 1 at once, with
    one line naming the query and the cause. Spark's stack traces go to the log file that
    line names, not to the terminal."""
    from odradek.pipeline.pipelines import page_view_events

    events, minute, top = f"{topic_name}-ev", f"{topic_name}-min", f"{topic_name}-top"
    create_topic(broker.bootstrap_servers, events, 1)
    create_topic(broker.bootstrap_servers, minute, 1)
    create_topic(broker.bootstrap_servers, top, 1, {"cleanup.policy": "compact", "max.message.bytes": "64"})
    page_view_events.generate(broker.bootstrap_servers, events, rate=0, count=50, seed=1, pages=5)
    # local[1]: three queries on one core. Before odradek-spark-python the later ones failed to
    # start there (their sources' Python workers missed Spark's fixed 10 s connect-back).
    proc = _odradek(
        "pipeline", "run", "page-views", "-b", broker.bootstrap_servers, "--input", events, "--output", minute,
        "--top-topic", top, "--checkpoint", str(tmp_path / "ckpt"), "--master", "local[1]",
        "--trigger", "1 second", "--conf", "spark.sql.shuffle.partitions=1",
        start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=420)  # a new JVM and two stateful queries: slow on a busy machine
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, err
    for trace in ("Traceback", "py4j", "\tat ", "Exception in task"):
        assert trace not in err, err
    last = err.strip().splitlines()[-1]
    match = re.fullmatch(
        r"Error: page-views failed: query page-views-\S+-top-pages: MessageTooLargeError: .+; "
        r"the other queries were stopped \(details in (\S+)\)",
        last,
    )
    assert match, err
    assert "\tat " in open(match.group(1), encoding="utf-8").read()  # the Java side, kept in the log
