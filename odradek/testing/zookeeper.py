"""A real ZooKeeper in a child process, for tests and local clusters.

ZooKeeper is an engine we run, never one we write. ``ZooKeeperServer`` starts the one
from Debian's ``zookeeper`` package (3.8; jars under ``/usr/share/java``) as
``java -cp <jars> org.apache.zookeeper.server.quorum.QuorumPeerMain zoo.cfg`` in
standalone mode, with its own data directory, a free loopback port, a 500 ms tick and
no admin HTTP server, and waits until it serves requests (the ``srvr`` four-letter word
answers with its mode). Its log goes to ``zookeeper.log`` in its directory.

``stop()`` sends SIGTERM (then SIGKILL after a grace period), ``kill()`` sends SIGKILL
(a crash); ``start()`` after either brings the same server back on the same port with the
same data, so sessions and znodes survive as they would on a real restart. Only the
process this object started is ever signalled.

Used by tests/cluster (one server per test session) and, later, by ``odradek cluster up``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from odradek.testing.process import free_port

DEFAULT_JAR_DIR = Path("/usr/share/java")
INSTALL_HINT = "install Debian's zookeeper package: apt-get install zookeeper"
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

# zookeeper.jar's manifest names most of its dependencies already; we list them anyway so the
# command line says what runs. Required jars first; the rest are used when present.
REQUIRED_JARS = ("zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-log4j12.jar", "log4j-1.2.jar")
OPTIONAL_JARS = (
    "netty-buffer.jar",
    "netty-codec.jar",
    "netty-common.jar",
    "netty-handler.jar",
    "netty-resolver.jar",
    "netty-transport.jar",
    "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar",
    "commons-cli.jar",
    "commons-io.jar",
    "jline.jar",
    "metrics-core.jar",
    "snappy-java.jar",
    "audience-annotations.jar",
)

# A small heap and a quick-starting JIT: a test server holds a few thousand znodes at most.
JVM_OPTIONS = ("-Xms32m", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")


class ZooKeeperNotInstalledError(RuntimeError):
    """Java or ZooKeeper's jars are missing on this machine."""


class ZooKeeperStartError(RuntimeError):
    """The server process exited or did not serve requests in time."""


def zookeeper_classpath(jar_dir: str | os.PathLike = DEFAULT_JAR_DIR) -> str:
    """The ``-cp`` value for ZooKeeper, or ZooKeeperNotInstalledError naming what is missing."""
    jar_dir = Path(jar_dir)
    missing = [jar for jar in REQUIRED_JARS if not (jar_dir / jar).is_file()]
    if missing:
        raise ZooKeeperNotInstalledError(
            f"ZooKeeper jars not found in {jar_dir} (missing {', '.join(missing)}); {INSTALL_HINT}"
        )
    jars = [jar_dir / jar for jar in REQUIRED_JARS]
    jars += [jar_dir / jar for jar in OPTIONAL_JARS if (jar_dir / jar).is_file()]
    return os.pathsep.join(str(jar) for jar in jars)


def java_executable() -> str:
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperNotInstalledError(f"java not found on PATH; {INSTALL_HINT} (it brings a Java runtime)")
    return java


def four_letter_word(host: str, port: int, word: str, timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command (``ruok``, ``srvr``, ``mntr``) and return the reply."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(word.encode())
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer:
    """One standalone ZooKeeper server on ``127.0.0.1:port`` with data in ``directory``."""

    def __init__(
        self,
        directory: str | os.PathLike | None = None,
        *,
        port: int | None = None,
        tick_time_ms: int = 500,
        max_session_timeout_ms: int = 60_000,
        jar_dir: str | os.PathLike = DEFAULT_JAR_DIR,
    ):
        self._tmp = None
        if directory is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="odradek-zk-")
            directory = self._tmp.name
        self.directory = Path(directory)
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.tick_time_ms = tick_time_ms
        # ZooKeeper caps session timeouts at 20 ticks by default (10 s at 500 ms); Kafka's
        # default zookeeper.session.timeout.ms is 18 s, so allow longer sessions.
        self.max_session_timeout_ms = max_session_timeout_ms
        self.jar_dir = Path(jar_dir)
        self.proc: subprocess.Popen | None = None
        self.last_start_seconds: float | None = None

    @property
    def connect_string(self) -> str:
        """``host:port``, the value of Kafka's ``zookeeper.connect`` (append ``/chroot`` as needed)."""
        return f"{self.host}:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_path(self) -> Path:
        return self.directory / "zookeeper.log"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self.directory / "zoo.cfg"
        config.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_time_ms}",
                    f"dataDir={self.data_dir}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    "maxClientCnxns=0",
                    f"maxSessionTimeout={self.max_session_timeout_ms}",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr,mntr",
                    "autopurge.purgeInterval=0",
                    "",
                ]
            )
        )
        log_config = self.directory / "log4j.properties"
        log_config.write_text(
            "\n".join(
                [
                    "log4j.rootLogger=INFO, FILE",
                    "log4j.appender.FILE=org.apache.log4j.FileAppender",
                    f"log4j.appender.FILE.File={self.log_path}",
                    "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout",
                    "log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1} - %m%n",
                    "",
                ]
            )
        )
        return config

    def command(self) -> list[str]:
        config = self._write_config()
        return [
            java_executable(),
            *JVM_OPTIONS,
            f"-Dlog4j.configuration=file:{self.directory / 'log4j.properties'}",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp",
            zookeeper_classpath(self.jar_dir),
            MAIN_CLASS,
            str(config),
        ]

    def start(self, timeout: float = 60.0) -> ZooKeeperServer:
        """Start (or start again, on the same port and data) and wait until it serves requests."""
        if self.running:
            return self
        command = self.command()
        began = time.monotonic()
        with open(self.directory / "zookeeper.out", "ab") as out:
            self.proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        try:
            self._wait_until_serving(timeout)
        except Exception:
            self.kill()
            raise
        self.last_start_seconds = time.monotonic() - began
        return self

    def _wait_until_serving(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        reply = ""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ZooKeeperStartError(
                    f"ZooKeeper exited with code {self.proc.returncode} before serving on "
                    f"{self.connect_string}; see {self.log_path} and {self.directory / 'zookeeper.out'}"
                )
            try:
                reply = four_letter_word(self.host, self.port, "srvr")
            except OSError:
                reply = ""
            if "Mode: " in reply:
                return
            time.sleep(0.05)
        raise ZooKeeperStartError(
            f"ZooKeeper on {self.connect_string} did not serve requests within {timeout:.0f}s "
            f"(last reply {reply!r}); see {self.log_path}"
        )

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
        if not self.running:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def kill(self) -> None:
        """SIGKILL: ZooKeeper dies as in a crash; ``start()`` brings it back with the same data."""
        if self.running:
            self.proc.kill()
            self.proc.wait()

    def restart(self, *, clean: bool = True, timeout: float = 60.0) -> ZooKeeperServer:
        """Stop (SIGTERM, or SIGKILL with ``clean=False``) and start again on the same port and data."""
        self.stop() if clean else self.kill()
        return self.start(timeout)

    def close(self) -> None:
        """Stop the server and remove its directory if this object created it."""
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else "stopped"
        return f"ZooKeeperServer({self.connect_string}, {state}, {self.directory})"


def expire_session(connect_string: str, client_id: tuple[int, bytes], timeout: float = 10.0) -> None:
    """Expire a client's ZooKeeper session from outside, as the server does when a client goes
    silent for longer than its session timeout: a second connection takes the session over
    with its id and password, then closes it. The session's ephemeral znodes vanish and its
    owner sees LOST, then a new session.

    The owner may reconnect (taking the session back) between the takeover and the close; so
    take over again until a connection finds the session gone."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import ConnectionLoss

    session_id = client_id[0]
    for _ in range(10):
        twin = KazooClient(hosts=connect_string, client_id=client_id)
        try:
            try:
                twin.start(timeout)
            except ConnectionLoss:
                continue  # the owner took the session back while the twin was starting: again
            # An expired session id is refused and the twin gets a new session instead.
            session_was_alive = twin.client_id is not None and twin.client_id[0] == session_id
        finally:
            twin.stop()  # a twin whose start failed is still connecting; close() needs it stopped
            twin.close()
        if not session_was_alive:
            return
    raise RuntimeError(
        f"ZooKeeper session 0x{session_id:x} could not be expired: its owner kept taking it back"
    )
