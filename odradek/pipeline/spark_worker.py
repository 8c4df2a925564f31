"""``odradek-spark-python``: the Python Spark starts for its workers, connecting back at once.

Spark gives a Python worker it starts on its own (the driver's data source planners and
streaming source runners, a batch write's committer; every worker when its daemon is off)
a fixed 10 s to connect back to the JVM, counted from the process start, not settable. The
worker modules import pyspark, pyarrow and numpy before they connect: half a second on a
quiet machine, and past 10 s on a loaded one, where the query then failed with "Python worker
failed to connect back". This launcher, set as ``PYSPARK_PYTHON`` by ``spark_session()``,
connects and authenticates first, with the standard library only, then runs the worker
module, which finds its connection already made. Anything else Spark starts (its daemon,
``pyspark.daemon``) runs on the interpreter unchanged.
"""

from __future__ import annotations

import os
import runpy
import socket
import struct
import sys


def factory_address() -> str | int | None:
    """Where the JVM waits for this worker, as pyspark's worker modules read it; None when
    Spark did not start this process as a worker that connects back."""
    path = os.environ.get("PYTHON_WORKER_FACTORY_SOCK_PATH")
    if path is not None:
        return path
    port = os.environ.get("PYTHON_WORKER_FACTORY_PORT")
    return int(port) if port else None


def connect_back(address: str | int) -> tuple:
    """Connects and authenticates as ``pyspark.util.local_connect_and_auth`` does; returns its
    (sock_file, sock). The pid that follows is left to the worker module."""
    timeout = int(os.environ.get("SPARK_AUTH_SOCKET_TIMEOUT", 15))
    buffer_size = int(os.environ.get("SPARK_BUFFER_SIZE", 65536))
    secret = os.environ.get("PYTHON_WORKER_FACTORY_SECRET")
    if isinstance(address, str) and secret is None:  # a Unix socket: no secret to show
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        sock.connect(address)
        return sock.makefile("rwb", buffer_size), sock
    host = "::1" if os.environ.get("SPARK_PREFER_IPV6", "false").lower() == "true" else "127.0.0.1"
    sock = socket.create_connection((host, address), timeout=timeout)
    sock_file = sock.makefile("rwb", buffer_size)
    token = (secret or "").encode()
    sock_file.write(struct.pack("!i", len(token)) + token)
    sock_file.flush()
    (length,) = struct.unpack("!i", sock_file.read(4))
    if sock_file.read(length) != b"ok":
        raise SystemExit("the Spark JVM refused this Python worker's secret")
    return sock_file, sock


def hand_over(address: str | int, connection: tuple) -> None:
    """The worker module's first call to ``local_connect_and_auth`` for ``address`` gets
    ``connection``; other calls (broadcast and barrier servers) connect as before."""
    import pyspark.util

    original = pyspark.util.local_connect_and_auth
    pending = [connection]

    def local_connect_and_auth(conn_info, auth_secret):
        if pending and conn_info == address:
            return pending.pop()
        return original(conn_info, auth_secret)

    pyspark.util.local_connect_and_auth = local_connect_and_auth
    try:
        import pyspark.worker_util  # pyspark 4.1+: the modules connect through it
    except ImportError:
        return
    pyspark.worker_util.local_connect_and_auth = local_connect_and_auth  # type: ignore[attr-defined]


def main() -> None:
    args = sys.argv[1:]
    address = factory_address()
    if len(args) != 2 or args[0] != "-m" or not args[1].startswith("pyspark.") or address is None:
        os.execv(sys.executable, [sys.executable, *args])
    connection = connect_back(address)
    hand_over(address, connection)
    sys.argv = [args[1]]
    runpy.run_module(args[1], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
