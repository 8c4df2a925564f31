"""Fixtures for the Streams tests: one local SparkSession per test process (its start is the
big cost), shared by every module that asks for it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# The pipeline tests' confluent-kafka helpers (create_topic, produce, read_topic) serve here too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pipeline"))


@pytest.fixture(scope="session")
def spark():
    """``local[2]``, no UI, two shuffle partitions."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from odradek.pipeline import spark_session

    session = spark_session(
        "local[2]",
        app_name="odradek-streams-tests",
        config={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.streaming.stateStore.maintenanceInterval": "600s",
            # A Python worker started on a loaded machine may take longer than the 15 s default to
            # connect back to the JVM.
            "spark.python.authenticate.socketTimeout": "120s",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
