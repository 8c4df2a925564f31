"""Brokers for tests: ``EmbeddedBroker`` (in a thread or a child process), ``BrokerProcess``, and
``EmbeddedCluster`` (a ZooKeeper and N broker processes in cluster mode).

``from odradek.testing import EmbeddedBroker`` — see ``odradek.testing.embedded``. The
pytest plugin (``odradek.testing.pytest_plugin``, registered as an entry point) gives the
``odradek_broker`` fixtures and ``odradek_cluster``. Imports are lazy: loading this package costs nothing.
"""

from __future__ import annotations

_EXPORTS = {
    "EmbeddedBroker": "odradek.testing.embedded",
    "EmbeddedBrokerError": "odradek.testing.embedded",
    "BrokerProcess": "odradek.testing.process",
    "EmbeddedCluster": "odradek.testing.embedded_cluster",
    "EmbeddedClusterError": "odradek.testing.embedded_cluster",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'odradek.testing' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
