"""``odradek pipeline``: the generator, the list, and one pipeline run end to end."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from pipeline_kafka import create_topic, produce, read_topic

from odradek.pipeline.cli import pipeline

pytestmark = pytest.mark.timeout(240)


def test_list_names_the_three_pipelines():
    result = CliRunner().invoke(pipeline, ["list"])
    assert result.exit_code == 0, result.output
    assert [line.split()[0] for line in result.output.splitlines()] == [
        "page-views",
        "offline-load",
        "value-length",
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
