"""Spark pipelines on Odradek: a native PySpark data source and ready pipelines.

    from odradek.pipeline import register, spark_session
    spark = spark_session()          # local[*], PYSPARK_PYTHON set, source registered
    df = (spark.read.format("odradek")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "page-views").load())

``register(spark)`` registers the ``odradek`` format on an existing session. The source
takes the options and gives the schema of Spark's Kafka source (``source.py``,
``options.py``); its streaming sink is exactly once (``exactly_once.py``).

Pipelines (``odradek pipeline run NAME``): ``page-views`` (views per page per minute
and a top-N table), ``offline-load`` (resumable export to Parquet partitioned by date),
``value-length`` (Kafka Streams' introductory example, ``mapValues(value -> length)``) and
``page-views-by-region``; all but ``offline-load`` are ``odradek.streams`` topologies
(``odradek/streams/apps``).

PySpark and PyArrow are optional dependencies (``pip install odradek[spark]``); nothing
here imports them until it is used.
"""

from __future__ import annotations

import os
import sys

__all__ = ["register", "spark_session", "worker_python", "OdradekDataSource"]


def worker_python() -> str:
    """The program Spark should start its Python workers with: ``odradek-spark-python``
    beside this interpreter (it connects back to the JVM before the slow imports; see
    ``spark_worker.py``), else this interpreter itself."""
    launcher = os.path.join(os.path.dirname(sys.executable), "odradek-spark-python")
    return launcher if os.access(launcher, os.X_OK) else sys.executable


def register(spark) -> None:
    """Register the ``odradek`` format with ``spark`` (a SparkSession)."""
    from odradek.pipeline.source import OdradekDataSource

    spark.dataSource.register(OdradekDataSource)


def spark_session(
    master: str | None = None,
    app_name: str = "odradek-pipeline",
    config: dict | None = None,
    *,
    own_process_group: bool = False,
):
    """A SparkSession for pipelines: ``local[*]`` unless ``master``, Python workers on this interpreter.

    Workers must run the interpreter that has odradek installed, so ``PYSPARK_PYTHON``
    defaults to ``worker_python()`` and the driver's to ``sys.executable``. The ``odradek``
    format is registered.

    ``own_process_group`` starts Spark's JVM (and so its Python workers) in a session of
    its own when this call starts it: Ctrl-C in a terminal then reaches this process
    only, instead of also interrupting the workers in the middle of a task.
    """
    os.environ.setdefault("PYSPARK_PYTHON", worker_python())
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    defaults = {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
        "spark.python.worker.reuse": "true",
    }
    settings = {**defaults, **(config or {})}
    master = master or "local[*]"
    if own_process_group and SparkContext._active_spark_context is None:
        from pyspark.java_gateway import launch_gateway

        conf = SparkConf().setMaster(master).setAppName(app_name).setAll(list(settings.items()))
        SparkContext(conf=conf, gateway=launch_gateway(conf, popen_kwargs={"start_new_session": True}))
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark


def __getattr__(name: str):
    if name == "OdradekDataSource":
        from odradek.pipeline.source import OdradekDataSource

        return OdradekDataSource
    raise AttributeError(f"module 'odradek.pipeline' has no attribute {name!r}")
