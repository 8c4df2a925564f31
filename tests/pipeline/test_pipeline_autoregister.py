"""Spark finds format("odradek") by itself (through the ``pyspark_odradek`` package)."""

import subprocess
import sys
import textwrap

from confluent_kafka import Producer

SCRIPT = textwrap.dedent(
    """
    import os, sys
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate())
    rows = (spark.read.format("odradek").option("kafka.bootstrap.servers", sys.argv[1])
            .option("subscribe", sys.argv[2]).load().orderBy("offset").collect())
    print("|".join(r.value.decode() for r in rows))
    spark.stop()
    """
)


def test_format_name_resolves_without_register(broker, topic_name):
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(3):
        producer.produce(topic_name, value=f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, broker.bootstrap_servers, topic_name],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "v0|v1|v2"
