"""Fixtures for the Streams tests: one local SparkSession per test process (its start is the
big cost), shared by every module that asks for it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support import local_spark

# The pipeline tests' confluent-kafka helpers (create_topic, produce, read_topic) serve here too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pipeline"))


@pytest.fixture(scope="session")
def spark():
    """The process's one local SparkSession (``support.local_spark``)."""
    yield from local_spark("odradek-streams-tests")
