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
            # A Python worker started on a loaded machine may take longer than the 15 s default to
            # connect back to the JVM (as in tests/streams/conftest.py).
            "spark.python.authenticate.socketTimeout": "120s",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory):
    """A broker of this module's own with its schema registry beside it on a free port
    (``broker.registry_url``); modules do not share subjects."""
    import requests
    from support import started_broker, wait_until

    from odradek.testing.process import free_port

    url = f"http://127.0.0.1:{free_port()}"

    def ready() -> bool:
        try:
            return requests.get(f"{url}/subjects", timeout=5).status_code == 200
        except requests.ConnectionError:
            return False

    for proc in started_broker(tmp_path_factory.mktemp("registry-broker") / "data", {"schema.registry.listeners": url}):
        proc.registry_url = url
        wait_until(ready, 60, f"the registry at {url}", interval=0.1)
        yield proc
