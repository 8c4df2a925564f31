"""What a newcomer tripped on: Ctrl-C ends every command the same way (its partial result,
then exit 130), errors that name the right setting, text output that says when it is not
the bytes, and a produce that fails to parse leaves no topic behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from cli_helpers import ck_committed, ck_produce

EXIT_INTERRUPTED = 130


def _start(broker, *args) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "odradek", *args, "--bootstrap-server", broker.bootstrap_servers],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        # A terminal's Ctrl-C, even when the suite itself was started in the background (where
        # the shell leaves SIGINT ignored, and a child inherits that).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _interrupt(proc: subprocess.Popen) -> tuple[str, str]:
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return out.decode(), err.decode()


def _wait_for(predicate, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _end_offset(broker, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "end-offset-probe"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


def test_consume_ctrl_c_commits_reports_and_exits_130(odradek, broker, topic_name):
    assert odradek("topics", "create", topic_name).code == 0
    ck_produce(broker.bootstrap_servers, topic_name, [(None, b"v%d" % i) for i in range(3)])
    group = f"g-{topic_name}"
    proc = _start(broker, "consume", topic_name, "--group", group, "--from-beginning")
    lines = []
    _wait_for(lambda: lines.append(proc.stdout.readline()) or len(lines) == 3, "three records printed")
    out, err = _interrupt(proc)
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert [line.decode() for line in lines] == ["v0\n", "v1\n", "v2\n"]
    assert "Processed a total of 3 messages" in err
    assert ck_committed(broker.bootstrap_servers, group, topic_name, [0]) == {0: 3}


def test_perf_consume_ctrl_c_prints_the_statistics_so_far(odradek, broker, topic_name):
    assert odradek("topics", "create", topic_name).code == 0
    ck_produce(broker.bootstrap_servers, topic_name, [(None, b"x" * 10) for _ in range(50)])
    group = f"g-{topic_name}"
    proc = _start(
        broker, "perf", "consume", topic_name, "--messages", "100", "--timeout", "120000", "--group", group,
        "--consumer-props", "auto.commit.interval.ms=100",
    )  # fmt: skip
    _wait_for(lambda: ck_committed(broker.bootstrap_servers, group, topic_name, [0]) == {0: 50}, "50 consumed")
    out, err = _interrupt(proc)
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert "Interrupted: 50 of 100 records consumed." in err
    assert out.startswith("50 records consumed, ") and "end-to-end latency" in out


def test_perf_produce_ctrl_c_prints_the_statistics_so_far(odradek, broker, topic_name):
    assert odradek("topics", "create", topic_name).code == 0
    proc = _start(broker, "perf", "produce", topic_name, "--num-records", "10000000", "--throughput", "500")
    _wait_for(lambda: _end_offset(broker, topic_name) >= 100, "100 records sent")
    out, err = _interrupt(proc)
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert "Interrupted: " in err and " of 10000000 records sent." in err
    sent = int(out.split(" records sent")[0])
    assert sent >= 100 and sent == _end_offset(broker, topic_name)


def test_consume_text_says_when_it_is_not_the_bytes(odradek, broker, topic_name):
    assert odradek("topics", "create", topic_name).code == 0
    binary = b"\x89PNG\r\n\x1a\xff"
    ck_produce(broker.bootstrap_servers, topic_name, [(None, b"text"), (None, binary)])
    text = odradek("consume", topic_name, "--from-beginning", "-e")
    assert text.code == 0, text
    assert text.out.splitlines()[1].startswith("\ufffdPNG")
    assert "record 0@1 holds bytes that are not UTF-8" in text.err and "--format raw" in text.err
    raw = subprocess.run(
        [sys.executable, "-m", "odradek", "consume", topic_name, "--from-beginning", "-e", "--format", "raw",
         "-b", broker.bootstrap_servers],
        capture_output=True, timeout=60,
    )  # fmt: skip
    assert raw.returncode == 0 and raw.stdout == b"text\n" + binary + b"\n"
    assert b"not UTF-8" not in raw.stderr


def test_configs_alter_broker_error_reads_as_a_sentence(odradek):
    refused = odradek("configs", "alter", "--broker", "0", "--add-config", "log.dirs=/elsewhere")
    assert refused.code == 1
    assert refused.err.startswith("Error: broker '0':")
    assert "Cannot update these configs dynamically" in refused.err
    assert "ConfigResource" not in refused.err


def test_oversize_record_hint_names_the_producer_limit(odradek, topic_name):
    big = "x" * 600_000 + "\n"
    r = odradek("produce", topic_name, "--producer-property", "max.request.size=500000", input=big)
    assert r.code == 1
    assert "larger than the producer's max.request.size (500000)" in r.err
    assert "raise the producer's max.request.size" in r.err


def test_produce_that_fails_to_parse_creates_no_topic(odradek, topic_name):
    r = odradek("produce", topic_name, "--key-separator", ":", input="no separator\n")
    assert r.code == 1 and "line 1" in r.err
    assert topic_name not in odradek("topics", "list", "--names-only").lines()
