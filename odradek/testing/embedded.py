"""A real Odradek broker inside your test process (or beside it): no JVM, no Docker.

    from odradek.testing import EmbeddedBroker

    with EmbeddedBroker() as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})

``EmbeddedBroker`` runs ``odradek.broker.server.Broker`` — the same broker as ``odradek
server`` — on its own asyncio event loop in a daemon thread (``mode="thread"``, the
default, which starts in a few tens of milliseconds once the broker's modules are
imported), or as a child process (``mode="process"``, through ``BrokerProcess``; slower to
start, but isolated from the test process's GIL and survives its crashes). It listens on
an ephemeral loopback port and keeps its data in a temporary directory removed on
``stop()``, unless ``data_dir`` is given.

Test-friendly defaults, each overridable through ``overrides`` (Kafka's broker keys):
``group.initial.rebalance.delay.ms=0`` (consumer groups form at once instead of after 3 s),
5 partitions (instead of 50) and replication factor 1 for ``__consumer_offsets`` and
``__transaction_state``, and the HTTP side (console, /metrics) on a free loopback port
(``http_url``) instead of 9644. Everything else is Kafka's default, including
``auto.create.topics.enable=true`` and ``num.partitions=1``.

Thread safety: ``start``/``stop``/``restart``/``create_topic`` may be called from any
thread but not concurrently; the broker's state is only touched on its own loop.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path

TEST_DEFAULTS = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "5",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.num.partitions": "5",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "http.listeners": "http://127.0.0.1:0",
}

MODES = ("thread", "process")


class EmbeddedBrokerError(RuntimeError):
    """The embedded broker failed to start or stop; the message says why."""


class EmbeddedBroker:
    """A single-node broker for tests. Use as a context manager, or ``start()``/``stop()``.

    Arguments:
      mode: "thread" (default) or "process".
      overrides: broker config keys, e.g. ``{"num.partitions": 3, "log.retention.ms": 1000}``.
      data_dir: keep the data here (kept after stop); default a temp dir removed on stop.
      port: the port to listen on; 0 (default) picks a free one.
      host: the loopback address to listen on and advertise.
      node_id: the broker's node.id.
      startup_timeout: seconds to wait for the broker to listen.
    """

    def __init__(
        self,
        *,
        mode: str = "thread",
        overrides: dict[str, object] | None = None,
        data_dir: str | os.PathLike | None = None,
        port: int = 0,
        host: str = "127.0.0.1",
        node_id: int = 0,
        startup_timeout: float = 30.0,
    ):
        if mode not in MODES:
            raise ValueError(f"mode must be 'thread' or 'process', got {mode!r}")
        self.mode = mode
        self.host = host
        self.node_id = node_id
        self.startup_timeout = startup_timeout
        self.overrides = {**TEST_DEFAULTS, **{str(k): str(v) for k, v in (overrides or {}).items()}}
        self._requested_port = int(port)
        self._port: int | None = None
        self._own_dir = data_dir is None
        self._data_dir = Path(data_dir) if data_dir is not None else None
        self.startup_seconds: float | None = None
        # thread mode
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._broker = None
        # process mode
        self._process = None

    # -- what tests use ------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """``host:port``, for ``bootstrap.servers`` / ``bootstrap_servers``."""
        if self._port is None:
            raise EmbeddedBrokerError("the embedded broker is not running; call start() or use `with`")
        return f"{self.host}:{self._port}"

    @property
    def port(self) -> int | None:
        return self._port

    @property
    def http_url(self) -> str | None:
        """The console and /metrics, e.g. ``http://127.0.0.1:39181`` (None with ``http.listeners=``)."""
        if self.mode == "process":
            return self._process.http_url if self._process is not None else None
        http = self._broker.http if self._broker is not None else None
        return http.urls[0] if http is not None else None

    @property
    def data_dir(self) -> Path | None:
        return self._data_dir

    @property
    def running(self) -> bool:
        if self.mode == "thread":
            return self._thread is not None and self._thread.is_alive()
        return (
            self._process is not None and self._process.proc is not None and self._process.proc.poll() is None
        )

    @property
    def broker(self):
        """The in-thread ``odradek.broker.server.Broker`` (thread mode only); touch it via ``call``."""
        return self._broker

    def client_config(self, **extra) -> dict:
        """``{"bootstrap.servers": ...}`` plus ``extra``, for confluent-kafka and friends."""
        return {"bootstrap.servers": self.bootstrap_servers, **extra}

    def create_topic(
        self, name: str, partitions: int = 1, config: dict | None = None, replication_factor: int = 1
    ) -> None:
        """Create a topic and return once it is ready to take records."""
        configs = {str(k): str(v) for k, v in (config or {}).items()}
        if self.mode == "thread":
            self.call(
                lambda b: b.controller.create_topic(name, partitions, replication_factor, None, configs)
            )
            return
        from odradek.client.blocking import Admin
        from odradek.client.structs import NewTopic

        with Admin(bootstrap_servers=self.bootstrap_servers) as admin:
            admin.create_topics([NewTopic(name, partitions, replication_factor, configs or None)])

    def call(self, fn):
        """Run ``fn(broker)`` on the broker's event loop and return its result (thread mode)."""
        if self.mode != "thread" or self._loop is None or self._broker is None:
            raise EmbeddedBrokerError("call() needs a running thread-mode broker")
        done: Future = Future()

        def run():
            try:
                done.set_result(fn(self._broker))
            except BaseException as exc:  # handed to the caller's thread
                done.set_exception(exc)

        self._loop.call_soon_threadsafe(run)
        return done.result(self.startup_timeout)

    # -- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> EmbeddedBroker:
        if self.running:
            return self
        if self._data_dir is None:
            self._data_dir = Path(tempfile.mkdtemp(prefix="odradek-embedded-"))
        t0 = time.perf_counter()
        try:
            if self.mode == "thread":
                self._start_thread()
            else:
                self._start_process()
        except BaseException:
            self._cleanup_dir()
            raise
        self.startup_seconds = time.perf_counter() - t0
        return self

    def stop(self) -> None:
        """Shut down cleanly (flush, checkpoints) and remove the temp data dir."""
        try:
            self._shutdown()
        finally:
            self._cleanup_dir()

    close = stop

    def restart(self) -> EmbeddedBroker:
        """Stop cleanly and start again on the same port with the same data."""
        port = self._port
        self._shutdown()
        if port:
            self._requested_port = port
        return self.start()

    def _shutdown(self) -> None:
        try:
            if self.mode == "thread":
                self._stop_thread()
            elif self._process is not None:
                self._process.stop()
                self._process = None
        finally:
            if not self.running:
                self._port = None

    def _cleanup_dir(self) -> None:
        if self._own_dir and self._data_dir is not None and not self.running:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._data_dir = None

    def _settings(self, port: int) -> dict[str, str]:
        return {
            "listeners": f"PLAINTEXT://{self.host}:{port}",
            "log.dirs": str(self._data_dir),
            "node.id": str(self.node_id),
            **self.overrides,
        }

    # thread mode

    def _start_thread(self) -> None:
        import sys

        if "hypothesis" not in sys.modules:
            # kio registers optional hypothesis strategies on import when hypothesis is
            # importable, which doubles the broker's import time. Skip them only while
            # the broker's modules load, so the test process can still import hypothesis.
            sys.modules["hypothesis"] = None  # type: ignore[assignment]
            try:
                from odradek.broker.config import BrokerConfig
                from odradek.broker.server import Broker
            finally:
                if sys.modules.get("hypothesis", 0) is None:
                    del sys.modules["hypothesis"]
        else:
            from odradek.broker.config import BrokerConfig
            from odradek.broker.server import Broker

        config = BrokerConfig.load(None, self._settings(self._requested_port))
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = _new_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            try:
                loop.run_until_complete(self._serve(Broker(config), ready, failure))
            except BaseException as exc:
                if not ready.is_set():
                    failure.append(exc)
            finally:
                try:
                    loop.run_until_complete(loop.shutdown_asyncgens())
                    loop.run_until_complete(loop.shutdown_default_executor())
                finally:
                    loop.close()
                    ready.set()

        self._thread = threading.Thread(
            target=run, name=f"odradek-embedded-broker-{self.node_id}", daemon=True
        )
        self._thread.start()
        if not ready.wait(self.startup_timeout):
            raise EmbeddedBrokerError(f"the embedded broker did not start within {self.startup_timeout}s")
        if failure:
            self._thread.join(5)
            self._thread = None
            exc = failure[0]
            raise EmbeddedBrokerError(f"the embedded broker failed to start: {exc}") from exc

    async def _serve(self, broker, ready: threading.Event, failure: list) -> None:
        self._stop_event = asyncio.Event()
        try:
            await broker.start()
        except BaseException as exc:
            failure.append(exc)
            await broker.shutdown()
            ready.set()
            return
        self._broker = broker
        self._port = broker.bound_port()
        ready.set()
        try:
            await self._stop_event.wait()
        finally:
            await broker.shutdown()
            self._broker = None

    def _stop_thread(self) -> None:
        thread, loop, stop = self._thread, self._loop, self._stop_event
        if thread is None:
            return
        if thread.is_alive() and loop is not None and stop is not None:
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:  # the loop is already closed
                pass
        thread.join(60)
        if thread.is_alive():
            raise EmbeddedBrokerError("the embedded broker did not stop within 60s")
        self._thread = None
        self._loop = None
        self._stop_event = None

    # process mode

    def _start_process(self) -> None:
        from odradek.testing.process import BrokerProcess, free_port

        port = self._requested_port or free_port()
        proc = BrokerProcess(
            self._data_dir / "data",
            port=port,
            overrides=self.overrides,
            log_path=self._data_dir / "broker.log",
            node_id=self.node_id,
        )
        proc.host = self.host
        try:
            proc.start(self.startup_timeout)
        except Exception as exc:
            raise EmbeddedBrokerError(
                f"the broker process failed to start: {exc}\n{proc.log_text()[-2000:]}"
            ) from exc
        self._process = proc
        self._port = port

    def log_text(self) -> str:
        """The broker process's log (process mode; thread mode logs through ``logging``)."""
        return self._process.log_text() if self._process is not None else ""

    def __repr__(self) -> str:
        where = f"{self.host}:{self._port}" if self._port else "stopped"
        return f"<EmbeddedBroker {self.mode} {where}>"


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()
