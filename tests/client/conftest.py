"""Brokers for the client tests: tansu (the Rust Kafka-compatible broker) and/or Odradek.

``ODRADEK_TEST_BROKERS=tansu,odradek`` picks the brokers (default: both). The ``kafka``
fixture is session-scoped and parametrized over them, so every test that uses it runs
once per broker. Each broker is a child process on a free loopback port, stopped by PID
at the end.

Tansu 0.6 keeps data in memory and lacks a few APIs (AlterConfigs, CreatePartitions,
OffsetDelete); tests needing them skip there (``kafka.supports(api_key)``) and run
against Odradek.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import uuid

import pytest
from support import tansu_command

from odradek.testing.process import BrokerProcess, free_port, wait_for_port

BROKERS = [b.strip() for b in os.environ.get("ODRADEK_TEST_BROKERS", "odradek,tansu").split(",") if b.strip()]


class TansuBroker:
    name = "tansu"
    persistent = False  # memory storage: a restart loses the data

    def __init__(self, log_dir):
        self.port = free_port()
        self.log_path = os.path.join(str(log_dir), f"tansu-{self.port}.log")
        self.proc: subprocess.Popen | None = None
        self._versions: dict[int, tuple[int, int]] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> TansuBroker:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                tansu_command("127.0.0.1", self.port),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_for_port("127.0.0.1", self.port, 30, self.proc)
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def restart(self) -> None:
        self.stop()
        self.start()

    def supports(self, api_key: int) -> bool:
        return api_key in self.api_versions()

    def api_versions(self) -> dict[int, tuple[int, int]]:
        if self._versions is None:
            from odradek.client.blocking import Admin

            with Admin(bootstrap_servers=self.bootstrap_servers) as admin:
                self._versions = admin.api_versions()
        return self._versions


class OdradekBroker(TansuBroker):
    name = "odradek"
    persistent = True

    def __init__(self, log_dir):
        self._proc = BrokerProcess(
            os.path.join(str(log_dir), "data"), log_path=os.path.join(str(log_dir), "odradek.log")
        )
        self.port = self._proc.port
        self._versions = None

    @property
    def proc(self):
        return self._proc.proc

    def start(self) -> OdradekBroker:
        self._proc.start()
        return self

    def kill(self) -> None:
        self._proc.kill()

    def stop(self) -> None:
        self._proc.stop()

    def restart(self) -> None:
        self._proc.stop()
        self._proc.start()


def make_broker(name: str, log_dir):
    if name == "tansu":
        return TansuBroker(log_dir)
    if name == "odradek":
        return OdradekBroker(log_dir)
    raise ValueError(f"unknown broker {name!r} in ODRADEK_TEST_BROKERS (tansu, odradek)")


@pytest.fixture(scope="session", params=BROKERS)
def kafka(request, tmp_path_factory):
    """A running broker for the session (tests use unique topic and group names)."""
    broker = make_broker(request.param, tmp_path_factory.mktemp(f"{request.param}-broker"))
    broker.start()
    yield broker
    broker.kill()


@pytest.fixture(params=BROKERS)
def own_kafka(request, tmp_path):
    """Start a broker of this test's own (for restarts); one run per broker kind."""
    brokers = []

    def make():
        log_dir = tmp_path / f"b{len(brokers)}"
        log_dir.mkdir(parents=True, exist_ok=True)
        b = make_broker(request.param, log_dir)
        brokers.append(b)
        return b.start()

    yield make
    for b in brokers:
        b.kill()


@pytest.fixture
def bootstrap(kafka) -> str:
    return kafka.bootstrap_servers


@pytest.fixture
def topic(request):
    """A unique legal topic name derived from the test's name."""
    stem = re.sub(r"[^a-zA-Z0-9._-]", "-", request.node.name[:40])
    return f"c-{stem}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def group(request):
    stem = re.sub(r"[^a-zA-Z0-9._-]", "-", request.node.name[:30])
    return f"g-{stem}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def admin(bootstrap):
    from odradek import Admin

    with Admin(bootstrap_servers=bootstrap) as a:
        yield a


@pytest.fixture
def make_topic(admin):
    def make(name: str, partitions: int = 1, **configs):
        from odradek.client.structs import NewTopic

        admin.create_topics(
            [NewTopic(name, partitions, 1, {k.replace("_", "."): str(v) for k, v in configs.items()})]
        )
        return name

    return make


@pytest.fixture
def unused_port() -> int:
    """A loopback port nothing listens on."""
    return free_port()
