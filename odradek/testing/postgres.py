"""A real PostgreSQL server in a child process, for tests and benchmarks.

PostgreSQL is an engine we run, never one we write. ``PostgresServer`` uses Debian's
``postgresql`` package (``/usr/lib/postgresql/<version>/bin``): ``initdb`` into a fresh
temporary directory (trust authentication, no fsync: test data), then ``postgres`` on a
free loopback port with its Unix socket in the same directory, and waits until it answers
a query. PostgreSQL refuses to run as root, so when this process is root both commands run
as the ``postgres`` system user (the package creates it) and the directory is handed to it.

``stop()`` asks for a fast shutdown (SIGINT: open transactions roll back) and waits;
``kill()`` sends SIGKILL. Only the process this object started is ever signalled.

    with PostgresServer() as pg:
        url = pg.jdbc_url(pg.create_database("orders"))   # jdbc:postgresql://127.0.0.1:5xxxx/orders
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from odradek.testing.process import free_port

INSTALL_HINT = "install Debian's postgresql package: apt-get install postgresql"
SUPERUSER = "odradek"
SYSTEM_USER = "postgres"  # who runs the server when we are root


class PostgresNotInstalledError(RuntimeError):
    """PostgreSQL's server binaries are missing on this machine."""


class PostgresStartError(RuntimeError):
    """initdb or the server failed, or the server did not answer in time."""


def postgres_bindir() -> Path:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding initdb and postgres (or $PG_BINDIR)."""
    candidates = [Path(os.environ["PG_BINDIR"])] if os.environ.get("PG_BINDIR") else []
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: _version_key(p.parent.name))
    candidates += reversed(versions)
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "postgres").is_file():
            return bindir
    raise PostgresNotInstalledError(
        f"no initdb/postgres found under /usr/lib/postgresql/*/bin; {INSTALL_HINT}"
    )


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", name)) or (0,)


class PostgresServer:
    def __init__(self, port: int | None = None, host: str = "127.0.0.1"):
        self.host = host
        self.port = port or free_port()
        self.bindir = postgres_bindir()
        self.user = SUPERUSER
        self.base_dir: Path | None = None
        self.proc: subprocess.Popen | None = None
        self._run_as = SYSTEM_USER if os.geteuid() == 0 else None
        if self._run_as is not None:
            try:
                pwd.getpwnam(self._run_as)
            except KeyError:
                raise PostgresNotInstalledError(
                    f"running as root and there is no {self._run_as!r} user to run PostgreSQL as; {INSTALL_HINT}"
                ) from None

    @property
    def data_dir(self) -> Path:
        assert self.base_dir is not None, "start() first"
        return self.base_dir / "data"

    @property
    def log_path(self) -> Path:
        assert self.base_dir is not None, "start() first"
        return self.base_dir / "postgres.log"

    def jdbc_url(self, database: str = "postgres") -> str:
        """The ``connection.url`` a Confluent JDBC connector config would carry."""
        return f"jdbc:postgresql://{self.host}:{self.port}/{database}"

    def conninfo(self, database: str = "postgres") -> str:
        return f"host={self.host} port={self.port} dbname={database} user={self.user}"

    def _popen_user(self) -> dict:
        return {"user": self._run_as, "group": self._run_as} if self._run_as else {}

    def start(self, timeout: float = 60.0) -> PostgresServer:
        if self.base_dir is None:
            self.base_dir = Path(tempfile.mkdtemp(prefix="odradek-postgres-"))
            if self._run_as:
                shutil.chown(self.base_dir, self._run_as, self._run_as)
            self._initdb()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    str(self.bindir / "postgres"),
                    "-D", str(self.data_dir),
                    "-h", self.host,
                    "-p", str(self.port),
                    "-k", str(self.base_dir),
                    "-c", "fsync=off",
                    "-c", "synchronous_commit=off",
                    "-c", "full_page_writes=off",
                    "-c", "max_connections=50",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.base_dir,
                **self._popen_user(),
            )  # fmt: skip
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.kill()
            raise
        return self

    def _initdb(self) -> None:
        result = subprocess.run(
            [
                str(self.bindir / "initdb"),
                "-D", str(self.data_dir),
                "-U", self.user,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            capture_output=True,
            text=True,
            cwd=self.base_dir,
            **self._popen_user(),
        )  # fmt: skip
        if result.returncode:
            raise PostgresStartError(f"initdb failed ({result.returncode}): {result.stderr.strip()[-2000:]}")

    def _wait_ready(self, timeout: float) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise PostgresStartError(
                    f"postgres exited with code {self.proc.returncode}; its log:\n{self.log_text()[-3000:]}"
                )
            try:
                with psycopg.connect(self.conninfo(), connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError as exc:
                last = exc
                time.sleep(0.05)
        raise PostgresStartError(f"postgres did not answer on {self.host}:{self.port} in {timeout}s: {last}")

    def create_database(self, name: str | None = None) -> str:
        """A new empty database (a unique name unless given); returns its name."""
        import psycopg
        from psycopg import sql

        name = name or f"db_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.conninfo(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return name

    def stop(self, timeout: float = 30.0) -> None:
        """A fast shutdown (SIGINT), then SIGKILL if it takes longer than ``timeout``."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except (FileNotFoundError, AssertionError):
            return ""

    def close(self) -> None:
        """Stop the server and remove its directory."""
        self.stop()
        if self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
