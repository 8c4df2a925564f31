"""A Spark standalone cluster on 127.0.0.1 for tests: one master and N workers, started from the
``pyspark`` wheel's own ``bin/spark-class`` (``org.apache.spark.deploy.master.Master`` and
``org.apache.spark.deploy.worker.Worker``) on free ports, stopped by the PIDs it started.

    with SparkStandaloneCluster(workers=2, work_dir=tmp_path) as cluster:
        spark = spark_session(cluster.master_url, config=cluster.session_config())

Executors run Python in their own processes: ``session_config`` points them at this interpreter
(``spark.pyspark.python``: the venv with odradek's dependencies), and ``ship_odradek(spark)`` sends
odradek itself as a zip (``addPyFile``), as one would to machines where it is not installed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from odradek.pipeline import worker_python
from odradek.pipeline.ship import odradek_zip, ship_odradek

from .process import free_port, wait_for_port

__all__ = ["SparkStandaloneCluster", "odradek_zip", "ship_odradek"]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class SparkStandaloneCluster:
    """A master and ``workers`` workers (``cores`` cores, ``memory`` each); ``start()``/``stop()``."""

    def __init__(
        self, workers: int = 2, work_dir: str | os.PathLike | None = None, cores: int = 1, memory: str = "1g"
    ):
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="odradek-spark-"))
        self.port = free_port()
        self.ui_port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self._procs: list[subprocess.Popen] = []

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        env = {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(self.work_dir / "logs"),
            "PYSPARK_PYTHON": worker_python(),
        }
        log = open(self.work_dir / f"{name}.log", "ab")  # noqa: SIM115 (the child owns it; closed below)
        with log:
            proc = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        self._procs.append(proc)
        return proc

    def start(self, timeout: float = 120.0) -> SparkStandaloneCluster:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        master = self._spawn(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(self.ui_port),
            ],  # fmt: skip
        )
        wait_for_port("127.0.0.1", self.port, timeout, master)
        for i in range(self.workers):
            work = self.work_dir / f"worker{i}"
            work.mkdir(exist_ok=True)
            self._spawn(
                f"worker{i}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(free_port()),
                    "--webui-port",
                    str(free_port()),
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--work-dir",
                    str(work),
                    self.master_url,
                ],  # fmt: skip
            )
        deadline = time.monotonic() + timeout
        while self.alive_workers() < self.workers:
            dead = [p for p in self._procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"the Spark cluster did not come up ({self.alive_workers()}/{self.workers} workers); "
                    f"logs in {self.work_dir}"
                )
            time.sleep(0.2)
        return self

    def alive_workers(self) -> int:
        """Workers the master counts as ALIVE (its JSON status page)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as resp:
                return int(json.loads(resp.read()).get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def session_config(self) -> dict[str, str]:
        """Spark settings for an app on this cluster: executors on this interpreter, small and local."""
        return {
            "spark.pyspark.python": worker_python(),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.memory": "512m",
            "spark.executor.cores": str(self.cores),
            "spark.cores.max": str(self.cores * self.workers),
        }

    def stop(self) -> None:
        """SIGTERM to each process this cluster started (its session: the JVM and its children), then SIGKILL."""
        for proc in reversed(self._procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self._procs):
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self._procs.clear()

    def __enter__(self) -> SparkStandaloneCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
