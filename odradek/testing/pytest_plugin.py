"""pytest plugin: a real Odradek broker as a fixture (registered through the ``pytest11`` entry point).

Fixtures:
  ``odradek_broker``          a fresh ``EmbeddedBroker`` for one test (function scope).
  ``odradek_broker_session``  one broker shared by the whole session; use unique topic names.
  ``odradek_broker_factory``  ``make(**kwargs)`` → a started ``EmbeddedBroker`` (stopped after the
                              test), for several brokers or special configs in one test.
  ``odradek_cluster``         a started ``EmbeddedCluster`` (its own ZooKeeper and 3 broker
                              processes in cluster mode) for one test; the marker
                              ``@pytest.mark.odradek_cluster(brokers=5, racks=[...], overrides={...})``
                              passes keyword arguments.

Options: the marker ``@pytest.mark.odradek_broker(overrides={...}, mode="process")`` passes
keyword arguments to the ``odradek_broker`` fixture's broker; the ini option
``odradek_broker_mode`` (or ``--odradek-broker-mode``) picks "thread" (default) or "process"
for every fixture.

Nothing heavy is imported until a fixture is used, so having the plugin installed costs
other test suites nothing.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("odradek", "Odradek embedded broker")
    group.addoption(
        "--odradek-broker-mode",
        choices=("thread", "process"),
        default=None,
        help="run odradek_broker fixtures in a thread (default) or a child process",
    )
    parser.addini(
        "odradek_broker_mode",
        "thread (default) or process: where odradek_broker fixtures run",
        default="thread",
    )


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "odradek_broker(**kwargs): keyword arguments for the odradek_broker fixture's EmbeddedBroker "
        "(overrides={...}, mode='process', ...)",
    )
    config.addinivalue_line(
        "markers",
        "odradek_cluster(**kwargs): keyword arguments for the odradek_cluster fixture's EmbeddedCluster "
        "(brokers=3, racks=[...], overrides={...})",
    )


def _mode(config) -> str:
    return config.getoption("--odradek-broker-mode") or config.getini("odradek_broker_mode") or "thread"


@pytest.fixture
def odradek_broker(request):
    """A started ``EmbeddedBroker`` of this test's own: ``odradek_broker.bootstrap_servers``."""
    from odradek.testing.embedded import EmbeddedBroker

    marker = request.node.get_closest_marker("odradek_broker")
    kwargs = dict(marker.kwargs) if marker else {}
    kwargs.setdefault("mode", _mode(request.config))
    with EmbeddedBroker(**kwargs) as broker:
        yield broker


@pytest.fixture(scope="session")
def odradek_broker_session(request):
    """One ``EmbeddedBroker`` for the whole test session."""
    from odradek.testing.embedded import EmbeddedBroker

    with EmbeddedBroker(mode=_mode(request.config)) as broker:
        yield broker


@pytest.fixture
def odradek_broker_factory(request):
    """``make(**kwargs)`` starts an ``EmbeddedBroker``; all are stopped after the test."""
    from odradek.testing.embedded import EmbeddedBroker

    started = []

    def make(**kwargs):
        kwargs.setdefault("mode", _mode(request.config))
        broker = EmbeddedBroker(**kwargs).start()
        started.append(broker)
        return broker

    yield make
    for broker in reversed(started):
        broker.stop()


@pytest.fixture
def odradek_cluster(request):
    """A started ``EmbeddedCluster``: ``odradek_cluster.bootstrap_servers``, ``.kill(id)``, ``.metadata()``."""
    from odradek.testing.embedded_cluster import EmbeddedCluster

    marker = request.node.get_closest_marker("odradek_cluster")
    kwargs = dict(marker.kwargs) if marker else {}
    with EmbeddedCluster(**kwargs) as cluster:
        yield cluster
