"""A broker in a child process, for tests and tools: start, stop, kill -9, restart.

``BrokerProcess`` runs ``python -m odradek server`` (or ``program server``: an installed
``odradek`` script, say) on a free loopback port with its own data directory (and its HTTP side, ``http_url``, on another free port) and waits until
the Kafka port accepts connections. ``kill()`` sends SIGKILL
(a crash); ``stop()`` sends SIGTERM (a clean shutdown). Only the process it started is
ever signalled.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

_cursor: int | None = None  # where free_ports looks next, an index into port_range()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def port_range() -> range:
    """The ports ``free_port`` hands out in this process: those from 20000 up to the kernel's
    ephemeral range, or, in a pytest-xdist worker (``PYTEST_XDIST_WORKER`` gw0, gw1, ...), that
    worker's own slice of them, so that two workers never pick the same port between its pick
    and its server's bind."""
    low, high = 20000, _ephemeral_low()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    try:
        count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        index = int(worker.removeprefix("gw")) % count if worker.startswith("gw") else 0
    except ValueError:
        count, index = 1, 0
    if count > 1 and high > low:
        size = (high - low) // count
        low += index * size
        high = low + size
    return range(low, high)


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive loopback ports that are free now (for a command that
    numbers its servers' ports from a base, as ``odradek cluster up --port`` does).

    Taken from ``port_range()``, below the kernel's ephemeral range, so that no client
    connection's source port (which the kernel takes from that range) can take one before
    its server binds it; the ports are handed out in turn from a random start, so none
    twice in this process until the whole range has gone round. When no ``count`` ports in a
    row are free there: a port the kernel picks (bind to 0) for one, RuntimeError for more."""
    global _cursor
    ports = port_range()
    if _cursor is None:
        _cursor = random.randrange(len(ports))
    for _ in range(len(ports)):
        if _cursor + count > len(ports):
            _cursor = 0  # gone round: ports of servers long stopped may serve again
        base = ports[_cursor]
        block = range(base, base + count)
        _cursor += 1
        if all(_bindable(port) for port in block):
            _cursor += count - 1
            return base
    if count == 1:
        return _kernel_port()
    raise RuntimeError(f"no {count} free loopback ports in a row in {ports}")


def free_port() -> int:
    """A loopback port that is free now, for a server started a moment later (see ``free_ports``)."""
    return free_ports(1)


def _kernel_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(host: str, port: int, timeout: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"broker exited with code {proc.returncode} before listening on {host}:{port}")
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.01)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")



class BrokerProcess:
    def __init__(
        self,
        data_dir: str | os.PathLike | None = None,
        *,
        port: int | None = None,
        overrides: dict[str, object] | None = None,
        log_path: str | os.PathLike | None = None,
        node_id: int = 0,
        program: Sequence[str] = (sys.executable, "-m", "odradek"),
    ):
        self._tmp = None
        self.program = list(program)
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="odradek-")
            data_dir = self._tmp.name
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self.node_id = node_id
        self.overrides = {str(k): str(v) for k, v in (overrides or {}).items()}
        # The HTTP side (console, /metrics) on a port of its own, unless the caller chose one.
        if "http.listeners" not in self.overrides:
            self.overrides["http.listeners"] = f"http://127.0.0.1:{free_port()}"
        # No schema registry beside it unless asked: many brokers on one machine would all
        # want port 8081.
        self.overrides.setdefault("schema.registry.listeners", "")
        self.log_path = Path(log_path) if log_path else self.data_dir.parent / f"broker-{self.port}.log"
        self.proc: subprocess.Popen | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def http_url(self) -> str | None:
        """Where the console and /metrics are served (None when HTTP is off or on port 0)."""
        first = self.overrides["http.listeners"].split(",")[0].strip().rstrip("/")
        if not first or first.endswith(":0"):
            return None
        return first

    def command(self) -> list[str]:
        settings = {
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.data_dir),
            "node.id": str(self.node_id),
            **self.overrides,
        }
        cmd = [*self.program, "server"]
        for key, value in settings.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log_file = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command(), stdout=log_file, stderr=subprocess.STDOUT)
        log_file.close()
        try:
            wait_for_port(self.host, self.port, timeout, self.proc)
        except Exception:
            self.kill()
            raise
        return self

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: a clean shutdown. Returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def kill(self) -> None:
        """SIGKILL: the broker dies mid-flight, as in a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self, *, clean: bool = True) -> BrokerProcess:
        self.stop() if clean else self.kill()
        return self.start()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
