"""Fixtures: the registry as a real ``odradek schema-registry`` process beside a real broker."""

from __future__ import annotations

import uuid

import pytest

# Re-exported for tests that still write `from conftest import ...`; new ones import
# registry_support (a name no other test directory uses).
from registry_support import CONTENT_TYPE, RegistryProcess, wait_until_ready  # noqa: F401


@pytest.fixture
def registry_factory(broker, tmp_path):
    """Start registries on the session broker; each test's own schemas topic unless given."""
    started: list[RegistryProcess] = []
    default_topic = f"_schemas-{uuid.uuid4().hex[:8]}"

    def make(topic: str | None = None, **overrides: str) -> RegistryProcess:
        proc = RegistryProcess(
            broker.bootstrap_servers, tmp_path / f"registry{len(started)}.log", topic or default_topic, **overrides
        )
        started.append(proc)
        return proc.start()

    yield make
    for proc in started:
        proc.stop()
        log = proc.log_text()
        assert "Traceback" not in log, f"the registry logged a traceback:\n{log[-4000:]}"


@pytest.fixture
def registry(registry_factory) -> RegistryProcess:
    return registry_factory()
