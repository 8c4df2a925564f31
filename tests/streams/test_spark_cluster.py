"""A Spark standalone cluster (a master and two workers from PySpark's own spark-class, on
127.0.0.1) runs a job that reads an Odradek topic and writes another through the `odradek` data
source, with odradek shipped to the executors as a zip: proof that the data source is not local-only."""

from __future__ import annotations

import pytest
from support import wait_until

from odradek.client.blocking import Admin, Consumer, Producer
from odradek.client.structs import NewTopic
from odradek.testing.spark_cluster import SparkStandaloneCluster, ship_odradek

pytestmark = pytest.mark.timeout(600)  # a loaded 2-core machine: JVMs for a master, 2 workers, 2 executors


def test_a_job_on_a_standalone_cluster_reads_and_writes_odradek_topics(broker, topic_name, tmp_path):
    from pyspark.sql import functions as F

    from odradek.pipeline import spark_session

    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    bootstrap = broker.bootstrap_servers
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(source, 2, 1), NewTopic(sink, 2, 1)])
    with Producer(bootstrap_servers=bootstrap) as producer:
        for i in range(100):
            producer.send(source, f"word{i}".encode(), key=str(i).encode())
        producer.flush()

    with SparkStandaloneCluster(workers=2, work_dir=tmp_path / "spark") as cluster:
        spark = spark_session(
            cluster.master_url, app_name="odradek-cluster-test", config=cluster.session_config()
        )
        try:
            zipped = ship_odradek(spark, tmp_path / "ship")
            status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus
            wait_until(lambda: status().size() - 1 >= 2, 300, "two executors (one per worker)")

            @F.udf("binary")
            def where_odradek_is(_value):
                import odradek

                return odradek.__file__.encode()

            records = spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
            df = records.option("subscribe", source).load()
            origin = F.struct(F.lit("odradek-at").alias("key"), where_odradek_is("value").alias("value"))
            out = df.select(
                "key", F.upper(F.col("value").cast("string")).alias("value"), F.array(origin).alias("headers")
            )
            out.write.format("odradek").mode("append").option("kafka.bootstrap.servers", bootstrap).option(
                "topic", sink
            ).save()
        finally:
            spark.stop()

    with Consumer(
        bootstrap_servers=bootstrap, group_id=f"g-{topic_name}", auto_offset_reset="earliest"
    ) as consumer:
        consumer.subscribe([sink])
        got: dict = {}
        origins: set = set()

        def step():
            for r in consumer.poll(timeout=1):
                got[r.key] = r.value
                origins.update(value.decode() for key, value in r.headers or ())

        wait_until(lambda: len(got) >= 100, 60, "the sink's records", step=step)
    assert got == {str(i).encode(): f"WORD{i}".encode() for i in range(100)}
    # The executors imported odradek from the shipped zip, not from this checkout.
    assert origins and all(zipped.name in origin for origin in origins), origins
