"""Fixtures for the Spark pipeline tests: one local SparkSession for the whole session."""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    """``local[2]``, no UI, two shuffle partitions: small and quick."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from odradek.pipeline import spark_session

    session = spark_session(
        "local[2]",
        app_name="odradek-pipeline-tests",
        config={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.streaming.stateStore.maintenanceInterval": "600s",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
