"""``odradek-spark-python`` connects back to Spark's JVM before its slow imports.

Spark allows a worker it starts on its own (the streaming source runner) a fixed 10 s to connect
back; a loaded machine took longer than that just to import pyspark, pyarrow and numpy. Here the
test takes the JVM's side of the handshake, so that it can look at the worker while the worker
waits for the answer to its secret. (Every Spark test in tests/pipeline and tests/streams runs
its workers through the launcher against the real JVM.)
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess

from odradek.pipeline import worker_python


def read_exactly(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        assert chunk, f"the worker closed the connection after {len(data)} of {n} bytes"
        data += chunk
    return data


def start_worker(port: int, secret: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHON_WORKER_FACTORY_PORT": str(port), "PYTHON_WORKER_FACTORY_SECRET": secret}
    env.pop("PYTHON_WORKER_FACTORY_SOCK_PATH", None)
    # The worker Spark starts on its own for each streaming query; its imports load pyarrow and numpy.
    command = [worker_python(), "-m", "pyspark.sql.streaming.python_streaming_source_runner"]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_the_worker_authenticates_before_loading_pyspark_then_reports_its_pid():
    assert os.path.basename(worker_python()) == "odradek-spark-python"  # installed beside python
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(60)
        worker = start_worker(server.getsockname()[1], "s3cret")
        try:
            conn, _ = server.accept()
            with conn:
                conn.settimeout(60)
                (length,) = struct.unpack("!i", read_exactly(conn, 4))
                assert read_exactly(conn, length) == b"s3cret"
                # The worker now waits for our answer: nothing heavy is loaded yet.
                with open(f"/proc/{worker.pid}/maps") as maps:
                    loaded = maps.read()
                assert "numpy" not in loaded and "pyarrow" not in loaded
                conn.sendall(struct.pack("!i", 2) + b"ok")
                # pyspark's own worker code writes the pid once its imports are done: it found
                # the connection already made.
                (pid,) = struct.unpack("!i", read_exactly(conn, 4))
                assert pid == worker.pid
        finally:
            worker.wait(60)
    # Closed before the runner's input: the worker module ends on that, as it would.
    assert worker.returncode != 0


def test_a_wrong_answer_to_the_secret_stops_the_worker_with_a_reason():
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(60)
        worker = start_worker(server.getsockname()[1], "s3cret")
        conn, _ = server.accept()
        with conn:
            (length,) = struct.unpack("!i", read_exactly(conn, 4))
            read_exactly(conn, length)
            conn.sendall(struct.pack("!i", 2) + b"no")
            _, err = worker.communicate(timeout=60)
    assert worker.returncode == 1 and b"refused this Python worker's secret" in err


def test_what_is_not_a_connecting_worker_runs_on_python_unchanged():
    # Spark's daemon (`-m pyspark.daemon ...`) and anything else: the interpreter, as given.
    run = subprocess.run([worker_python(), "-c", "import sys; print(sys.argv[1:])", "a", "b"], capture_output=True, timeout=60)
    assert run.returncode == 0 and run.stdout.decode().strip() == "['a', 'b']", run.stderr
