"""One local SparkSession per test module for the Streams building blocks (``spark_for_module``)."""

from __future__ import annotations

import contextlib
import os
import sys


@contextlib.contextmanager
def spark_for_module(name: str):
    """``local[2]``, two shuffle partitions, no UI; stopped when the module is done."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from odradek.pipeline import spark_session

    session = spark_session(
        "local[2]",
        app_name=name,
        config={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.streaming.stateStore.maintenanceInterval": "600s",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
