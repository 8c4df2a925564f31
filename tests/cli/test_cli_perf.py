"""`odradek perf produce|consume`: records/s, MB/s and latency percentiles, and the records really land."""

from __future__ import annotations

import re


def test_perf_produce_then_consume(odradek, broker, topic_name):
    assert odradek("topics", "create", topic_name, "-p", "2").code == 0
    r = odradek(
        "perf",
        "produce",
        "--topic",
        topic_name,
        "--num-records",
        "3000",
        "--record-size",
        "200",
        "--producer-props",
        "linger.ms=5",
    )
    assert r.code == 0, r
    line = r.lines()[-1]
    assert re.fullmatch(
        r"3000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, [\d.]+ ms max latency, "
        r"\d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th\.",
        line,
    ), line
    offsets = odradek("offsets", topic_name, "-o", "json").json()
    assert sum(o["offset"] for o in offsets) == 3000

    c = odradek("perf", "consume", topic_name, "-o", "json")
    assert c.code == 0, c
    data = c.json()
    assert data["records"] == 3000 and data["bytes"] == 3000 * 200
    assert data["records_per_sec"] > 0 and data["mb_per_sec"] > 0
    assert set(data["end_to_end_latency"]) == {"avg_ms", "max_ms", "p50_ms", "p95_ms", "p99_ms", "p999_ms"}

    text = odradek("perf", "consume", topic_name, "--messages", "1000")
    assert text.code == 0, text
    assert text.lines()[0].startswith("1000 records consumed, ")
    assert "99th" in text.out


def test_perf_produce_json_and_throttle(odradek, topic_name):
    r = odradek(
        "perf",
        "produce",
        topic_name,
        "-n",
        "200",
        "-s",
        "10",
        "--throughput",
        "1000",
        "--acks",
        "1",
        "-o",
        "json",
    )
    assert r.code == 0, r
    data = r.json()
    assert data["records"] == 200 and data["bytes"] == 2000
    assert data["elapsed_s"] >= 0.15  # 200 records at 1000/s take about 0.2 s
    assert data["p99_ms"] >= data["p50_ms"] >= 0


def test_perf_consume_empty_topic_explains(odradek, topic_name):
    assert odradek("topics", "create", topic_name).code == 0
    r = odradek("perf", "consume", topic_name)
    assert r.code == 1 and "is empty" in r.err and "odradek perf produce" in r.err
