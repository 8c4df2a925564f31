"""``odradek cluster up`` as a user runs it: the real CLI in a child process (in a process group
of its own, so a test can kill -9 the whole tree: cluster up, its ZooKeeper and its brokers),
its output read line by line as it comes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from odradek.testing.process import free_port, free_ports

START_TIMEOUT_S = 120


def free_block(n: int) -> int:
    """A first port with ``n`` free ports in a row."""
    return free_ports(n)


class ClusterUp:
    """``odradek cluster up --brokers N`` on ``data_dir`` with ports of its own; ``start()`` returns
    once it printed "Ctrl-C stops the cluster", with ``brokers`` {id: row of its table}."""

    def __init__(self, data_dir: Path, brokers: int = 3, *args: str, ports: tuple[int, int, int] | None = None):
        self.data_dir = data_dir
        self.count = brokers
        self.args = args
        self.base_port, self.zookeeper_port, self.console_port = ports or (free_block(brokers), free_port(), free_block(brokers))
        self.proc: subprocess.Popen | None = None
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self.brokers: dict[int, dict[str, str]] = {}

    @property
    def ports(self) -> tuple[int, int, int]:
        return self.base_port, self.zookeeper_port, self.console_port

    def bootstrap(self, *broker_ids: int) -> str:
        ids = broker_ids or range(1, self.count + 1)
        return ",".join(f"127.0.0.1:{self.base_port + i - 1}" for i in ids)

    def start(self) -> ClusterUp:
        command = [
            sys.executable, "-m", "odradek", "cluster", "up", "--brokers", str(self.count),
            "--data-dir", str(self.data_dir), "--port", str(self.base_port),
            "--zookeeper-port", str(self.zookeeper_port), "--console-port", str(self.console_port),
            # broker 1's schema registry on a free port (not 8081, which another run may hold)
            "--override", "schema.registry.listeners=http://127.0.0.1:0", *self.args,
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        threading.Thread(target=self._read, daemon=True).start()
        self.wait_for_line("Ctrl-C stops the cluster", START_TIMEOUT_S)
        self.brokers = self._table()
        return self

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self._changed:
                self.lines.append(line.rstrip())
                self._changed.notify_all()
        with self._changed:
            self.lines.append(None)  # the end
            self._changed.notify_all()

    def wait_for_line(self, text: str, timeout: float) -> str:
        """The first line that contains ``text``; AssertionError (with the output) after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = next((line for line in self.lines if line is not None and text in line), None)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                assert left > 0 and None not in self.lines, f"no line with {text!r}; cluster up said:\n" + self.output()
                self._changed.wait(left)

    def output(self) -> str:
        with self._changed:
            return "\n".join(line for line in self.lines if line is not None)

    def _table(self) -> dict[int, dict[str, str]]:
        lines = self.output().splitlines()
        header = next(i for i, line in enumerate(lines) if line.startswith("BROKER "))
        columns = lines[header].split()
        rows = [dict(zip(columns, line.split(), strict=True)) for line in lines[header + 1 : header + 1 + self.count]]
        return {int(row["BROKER"]): row for row in rows}

    def kill_broker(self, broker_id: int) -> None:
        os.kill(int(self.brokers[broker_id]["PID"]), signal.SIGKILL)

    def stop(self, timeout: float = 90) -> int:
        """SIGINT (Ctrl-C) and wait for the exit; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout)
        finally:
            self.kill_tree()

    def kill_tree(self) -> None:
        """kill -9 of cluster up, its ZooKeeper and its brokers (its process group), and wait
        until none of them holds a port."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        self.proc.wait(30)
        deadline = time.monotonic() + 30
        ports = [self.zookeeper_port, *range(self.base_port, self.base_port + self.count)]
        while any(_listening(port) for port in ports):
            assert time.monotonic() < deadline, "the killed processes still hold their ports"
            time.sleep(0.05)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False
