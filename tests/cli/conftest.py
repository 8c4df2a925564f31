"""Fixtures for the `odradek` command tests (helpers live in cli_helpers.py)."""

from __future__ import annotations

import pytest
from cli_helpers import Result, run_odradek


@pytest.fixture
def odradek(broker):
    """``odradek("topics", "list")`` runs the command against the session broker."""

    def run(*args, **kwargs) -> Result:
        return run_odradek(*args, "--bootstrap-server", broker.bootstrap_servers, **kwargs)

    return run


@pytest.fixture
def ck_admin(broker):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})
