"""A Spark standalone cluster (a master and two workers from PySpark's own spark-class, on
127.0.0.1) runs a Streams app, Kafka's WordCount, with ``spark.master=spark://…``: ``KafkaStreams``
creates the session and ships odradek to the executors itself. The same driver then runs a batch
job through the `odradek` data source whose rows say where the executors imported odradek from
(the shipped zip): proof that neither the DSL nor the data source is local-only.

The driver is a child process: this worker's own SparkSession (``local[2]``, shared by the Streams
test files) owns the one SparkContext a process may have, so a ``spark://`` session made here
would silently be that local one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter

import pytest

from odradek.client.blocking import Admin, Consumer, Producer
from odradek.client.structs import NewTopic
from odradek.pipeline import worker_python
from odradek.testing.spark_cluster import SparkStandaloneCluster

pytestmark = pytest.mark.timeout(600)  # a loaded 2-core machine: JVMs for a master, 2 workers, 2 executors

DRIVER = textwrap.dedent(
    """
    import json, sys
    from odradek.streams import KafkaStreams, Materialized, Produced, Serdes, StreamsBuilder

    bootstrap, master, lines, counts, tagged, state_dir, session_json = sys.argv[1:8]
    builder = StreamsBuilder()
    (
        builder.stream(lines)
        .flat_map_values(lambda line: line.lower().split())
        .group_by(lambda _key, word: word)
        .count(Materialized.as_("counts-store"))
        .to_stream()
        .to(counts, Produced(key_serde=Serdes.String(), value_serde=Serdes.Long()))
    )
    config = {
        "application.id": f"{counts}-app",
        "bootstrap.servers": bootstrap,
        "default.key.serde": Serdes.String(),
        "default.value.serde": Serdes.String(),
        "state.dir": state_dir,
        "spark.master": master,
        **json.loads(session_json),
    }
    streams = KafkaStreams(builder.build(), config, trigger={"availableNow": True})
    streams.start()
    streams.await_termination(300)
    failures = [str(q.exception()) for q in streams.queries() if q.exception() is not None]
    streams.close(60)
    spark = streams.spark

    from pyspark.sql import functions as F

    @F.udf("binary")
    def where_odradek_is(_value):
        import odradek

        return odradek.__file__.encode()

    rows = spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap).option("subscribe", lines).load()
    origin = F.struct(F.lit("odradek-at").alias("key"), where_odradek_is("value").alias("value"))
    out = rows.select("key", F.upper(F.col("value").cast("string")).alias("value"), F.array(origin).alias("headers"))
    out.write.format("odradek").mode("append").option("kafka.bootstrap.servers", bootstrap).option(
        "topic", tagged
    ).save()
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
    print(json.dumps({"master": spark.sparkContext.master, "executors": executors, "failures": failures}))
    spark.stop()
    """
)


def _consume(bootstrap: str, topic: str, group: str, count: int) -> list:
    with Consumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest") as consumer:
        consumer.subscribe([topic])
        got: list = []
        for _ in range(120):
            got += consumer.poll(timeout=1)
            if len(got) >= count:
                break
    return got


def test_a_streams_app_on_a_standalone_cluster(broker, topic_name, tmp_path):
    lines, counts, tagged = f"{topic_name}-lines", f"{topic_name}-counts", f"{topic_name}-tagged"
    bootstrap = broker.bootstrap_servers
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(lines, 2, 1), NewTopic(tagged, 2, 1)])
    text = [f"spark runs kafka streams {i % 4} {'again ' * (i % 3)}" for i in range(100)]
    with Producer(bootstrap_servers=bootstrap) as producer:
        for i, line in enumerate(text):
            producer.send(lines, line.encode(), key=str(i).encode())
        producer.flush()

    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    with SparkStandaloneCluster(workers=2, work_dir=tmp_path / "spark") as cluster:
        # The executors must wait for both workers: two cores in all, one per executor.
        session = {**cluster.session_config(), "spark.scheduler.minRegisteredResourcesRatio": "1.0",
                   "spark.scheduler.maxRegisteredResourcesWaitingTime": "300s"}  # fmt: skip
        run = subprocess.run(
            [
                sys.executable,
                str(script),
                bootstrap,
                cluster.master_url,
                lines,
                counts,
                tagged,
                str(tmp_path / "state"),
                json.dumps(session),
            ],  # fmt: skip
            capture_output=True,
            text=True,
            timeout=540,
            env={**os.environ, "PYSPARK_PYTHON": worker_python()},
        )
    assert run.returncode == 0, run.stderr[-4000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["master"] == cluster.master_url and report["executors"] == 2, report
    assert report["failures"] == []

    expected = Counter(word for line in text for word in line.lower().split())
    table = {}
    for r in _consume(bootstrap, counts, f"g-{topic_name}-counts", len(expected)):
        assert len(r.value) == 8, "a count is Kafka's 8-byte big-endian long"
        table[r.key.decode()] = int.from_bytes(r.value, "big", signed=True)
    assert table == expected

    got = _consume(bootstrap, tagged, f"g-{topic_name}-tagged", len(text))
    assert {r.key: r.value for r in got} == {
        str(i).encode(): line.upper().encode() for i, line in enumerate(text)
    }
    origins = {value.decode() for r in got for _key, value in r.headers or ()}
    # The executors imported odradek from the zip KafkaStreams shipped. Not necessarily every
    # Python worker: the executors run this interpreter, whose venv also has odradek installed
    # (editable), and one run in two saw a worker that had imported it from there first.
    assert any("odradek-for-executors.zip" in origin for origin in origins), origins
