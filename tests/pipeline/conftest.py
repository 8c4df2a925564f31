"""Fixtures for the Spark pipeline tests: one local SparkSession for the whole session."""

from __future__ import annotations

import pytest
from support import local_spark


@pytest.fixture(scope="session")
def spark():
    """The process's one local SparkSession (``support.local_spark``)."""
    yield from local_spark("odradek-pipeline-tests")


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
