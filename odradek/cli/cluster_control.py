"""How ``odradek cluster restart-broker`` talks to a running ``odradek cluster up``.

``cluster up`` listens on a local (Unix, Linux abstract namespace) socket whose name is derived
from its --data-dir, so there is no socket file to go stale after a kill -9: the kernel frees the
name when the process dies, and a second ``cluster up`` on the same data dir finds it taken.
Only the same user may ask (SO_PEERCRED). A request is one JSON line, the answer another:

    {"command": "restart-broker", "broker": 2}  →  {"ok": true, "message": "broker 2 restarted ..."}
    {"command": "status"}                       →  {"ok": true, "pid": 4242, "data_dir": "..."}

The socket's thread only reads requests and queues them; ``cluster up``'s main thread answers
them (``serve_pending``), so the broker processes have one owner.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import queue
import socket
import struct
import threading
from collections.abc import Callable
from pathlib import Path

import click

REQUEST_READ_TIMEOUT_S = 5.0
MAX_REQUEST_BYTES = 4096


class ClusterNotRunningError(click.ClickException):
    pass


class ClusterAlreadyRunningError(Exception):
    pass


def control_address(data_dir: str | os.PathLike) -> str:
    """The abstract socket name of the ``cluster up`` running on ``data_dir``."""
    digest = hashlib.sha256(str(Path(data_dir).absolute().resolve()).encode()).hexdigest()[:32]
    return f"\0odradek-cluster-up-{digest}"


class ControlServer:
    def __init__(self, data_dir: str | os.PathLike):
        self.data_dir = Path(data_dir)
        self._sock: socket.socket | None = None
        self._pending: queue.Queue[tuple[dict, socket.socket]] = queue.Queue()

    def start(self) -> None:
        """Take the data dir's name; ClusterAlreadyRunningError (with the holder's pid) if taken."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(control_address(self.data_dir))
        except OSError as exc:
            sock.close()
            if exc.errno != errno.EADDRINUSE:
                raise
            try:
                pid = send_request(self.data_dir, {"command": "status"}, timeout=5).get("pid", "?")
            except click.ClickException:
                pid = "?"
            raise ClusterAlreadyRunningError(
                f"an `odradek cluster up` (pid {pid}) already runs with --data-dir {self.data_dir}; "
                "stop it (Ctrl-C there) or use another --data-dir"
            ) from None
        sock.listen(8)
        self._sock = sock
        threading.Thread(target=self._accept, name="cluster-control", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:  # closed
                return
            try:
                request = self._read_request(conn)
            except (OSError, ValueError) as exc:
                _answer(conn, {"ok": False, "message": f"bad request: {exc}"})
                continue
            self._pending.put((request, conn))

    @staticmethod
    def _read_request(conn: socket.socket) -> dict:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", creds)
        if uid != os.getuid():
            raise ValueError(f"user {uid} may not control this cluster")
        conn.settimeout(REQUEST_READ_TIMEOUT_S)
        line = conn.makefile("rb").readline(MAX_REQUEST_BYTES)
        request = json.loads(line)
        if not isinstance(request, dict):
            raise ValueError("a request is a JSON object")
        return request

    def serve_pending(self, handle: Callable[[dict], dict], wait_s: float) -> None:
        """Answer the queued requests (waiting up to ``wait_s`` for the first) with ``handle``."""
        try:
            request, conn = self._pending.get(timeout=wait_s)
        except queue.Empty:
            return
        while True:
            if request.get("command") == "status":
                answer = {"ok": True, "pid": os.getpid(), "data_dir": str(self.data_dir)}
            else:
                answer = handle(request)
            _answer(conn, answer)
            try:
                request, conn = self._pending.get_nowait()
            except queue.Empty:
                return

    def close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()
            self._sock = None
        while not self._pending.empty():
            _request, conn = self._pending.get_nowait()
            _answer(conn, {"ok": False, "message": "the cluster is stopping"})


def _answer(conn: socket.socket, answer: dict) -> None:
    with conn:
        with contextlib.suppress(OSError):  # the asker gave up: nothing to tell
            conn.sendall(json.dumps(answer).encode() + b"\n")


def send_request(data_dir: str | os.PathLike, request: dict, timeout: float) -> dict:
    """Ask the ``cluster up`` running on ``data_dir``; ClusterNotRunningError if none is."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(control_address(data_dir))
        except (ConnectionRefusedError, FileNotFoundError):
            raise ClusterNotRunningError(
                f"no `odradek cluster up` is running with --data-dir {data_dir}; start one, or name its --data-dir"
            ) from None
        sock.sendall(json.dumps(request).encode() + b"\n")
        try:
            line = sock.makefile("rb").readline()
        except TimeoutError:
            raise click.ClickException(f"`odradek cluster up` did not answer within {timeout:.0f} s") from None
    if not line:
        raise click.ClickException("`odradek cluster up` closed the connection without answering (is it stopping?)")
    return json.loads(line)


@click.command("restart-broker")
@click.argument("broker_id", metavar="N", type=click.IntRange(min=0))
@click.option(
    "--data-dir",
    default="./odradek-cluster",
    show_default=True,
    type=click.Path(file_okay=False),
    help="The --data-dir of the running `odradek cluster up`.",
)
@click.option("--timeout", default=120.0, show_default=True, help="Seconds to wait for the broker to be back.")
def restart_broker(broker_id, data_dir, timeout):
    """Start broker N of a running `odradek cluster up` again.

    A broker that exited (kill -9, a crash) starts again with its data; one that runs is
    stopped first (SIGTERM: a controlled shutdown) and started again. The stale ZooKeeper
    registration a killed broker leaves is cleared first, so it rejoins at once. This command
    asks the `cluster up` running on --data-dir (through a local socket) and prints its answer.

    \b
    Examples:
      odradek cluster restart-broker 2
      odradek cluster restart-broker 3 --data-dir /tmp/my-cluster
    """
    answer = send_request(data_dir, {"command": "restart-broker", "broker": broker_id}, timeout)
    if not answer.get("ok"):
        raise click.ClickException(answer.get("message", "the restart failed"))
    click.echo(answer["message"])
