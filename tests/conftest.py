"""Shared fixtures: a real broker process on 127.0.0.1, and unique topic names; and how the
tests share out among pytest-xdist workers (`make test` runs ``pytest -n 3 --dist loadgroup``)."""

from __future__ import annotations

import logging
import re
import uuid

import pytest

from odradek.testing.process import BrokerProcess


def _log_librdkafka_through_logging() -> None:
    """librdkafka writes its log lines to stderr from its own threads, also after a test
    has ended and pytest has stopped capturing (a client still alive when its broker
    stops), so they land in the middle of the progress dots. The confluent-kafka clients
    the tests make get a ``logger`` unless they name one: their lines then go through
    Python's logging, which pytest captures and shows with the test that failed."""
    try:
        import confluent_kafka
        import confluent_kafka.admin
    except ImportError:
        return
    logger = logging.getLogger("librdkafka")

    def with_logger(init):
        def __init__(self, *args, **kwargs):
            if args and isinstance(args[0], dict):
                args = ({"logger": logger, **args[0]}, *args[1:])
            else:
                kwargs.setdefault("logger", logger)
            init(self, *args, **kwargs)

        return __init__

    # Producer and Consumer are C types: subclass them. AdminClient is a Python class whose
    # __init__ names itself (super(AdminClient, self)): wrap its __init__ in place.
    for name in ("Producer", "Consumer"):
        cls = getattr(confluent_kafka, name)
        setattr(confluent_kafka, name, type(name, (cls,), {"__init__": with_logger(cls.__init__)}))
    admin = confluent_kafka.admin.AdminClient
    admin.__init__ = with_logger(admin.__init__)


_log_librdkafka_through_logging()

# Test files that share one costly session fixture run in one xdist worker, so it starts once:
# the Spark pipeline tests share one SparkSession (a JVM).
# Spark's JVMs are the heaviest tenants: the pipeline files share one worker (and one
# SparkSession), the Streams files another, so no more than two Spark drivers run at once.
SHARED_WORKER = {"tests/pipeline/": "spark", "tests/streams/": "spark-streams"}
# Where the longest files are (clusters, Spark, wheels, the README): the workers take these
# first, so that none of them is the last one running while the other workers idle.
SLOW_FIRST = ("tests/pipeline/", "tests/streams/", "tests/cluster/", "tests/test_wheel_install.py", "tests/getting_started/")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """In xdist workers under ``--dist loadgroup``, the ``SLOW_FIRST`` files come first (every
    worker sorts alike, as xdist requires); a run in one process keeps the usual order."""
    if config.getoption("loadgroup", False):
        items.sort(key=lambda item: not item.nodeid.startswith(SLOW_FIRST))


def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist loadgroup``: each test file runs whole in one worker (its module-scoped
    brokers and clusters start once), and the files under a ``SHARED_WORKER`` prefix together.
    (xdist's own loadgroup groups ``@pytest.mark.xdist_group`` tests by renaming them, which
    pytest 9 ignores: here the file decides, or such a name where pytest 8 left one.)"""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # the order pytest_collection_modifyitems gave

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.rfind("@") > nodeid.rfind("]"):  # a test's own xdist_group (pytest 8)
                return nodeid.split("@")[-1]
            path = nodeid.split("::")[0]
            return next((group for prefix, group in SHARED_WORKER.items() if path.startswith(prefix)), path)

    return FileScheduling(config, log)


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    """One broker for the whole session (tests use unique topic names)."""
    # Many tests write records with fixed historical timestamps (2023); time-based retention
    # (7 days, checked every 5 minutes) would delete them mid-session, so this broker checks
    # hourly (a broker-only key: topic configs still describe as defaults). Retention itself
    # is tested on brokers of its own. A new consumer group forms at once, not after Kafka's 3 s
    # initial rebalance delay (tests/groups tests the delay).
    proc = BrokerProcess(
        tmp_path_factory.mktemp("broker") / "data",
        overrides={"log.retention.check.interval.ms": "3600000", "group.initial.rebalance.delay.ms": "0"},
    )
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture
def own_broker(tmp_path):
    """A broker of this test's own, for restarts, crashes and special configs."""
    procs = []

    def make(**overrides) -> BrokerProcess:
        proc = BrokerProcess(tmp_path / f"data{len(procs)}", overrides=overrides)
        procs.append(proc)
        return proc.start()

    yield make
    for proc in procs:
        proc.kill()


@pytest.fixture
def topic_name(request):
    """A unique, legal Kafka topic name (only [a-zA-Z0-9._-]) derived from the test's name."""
    stem = re.sub(r"[^a-zA-Z0-9._-]", "-", request.node.name[:40])
    return f"t-{stem}-{uuid.uuid4().hex[:8]}"
