"""An exclusive lock on a log dir: the ``.lock`` file Kafka uses, so two brokers never share one.

The lock is taken on ``<log dir>/.lock`` (created empty if missing, never written) with both
``fcntl`` record locks (what Kafka's ``FileChannel.tryLock`` takes on Linux, so a Kafka broker
and Odradek exclude each other) and ``flock`` (which also excludes a second broker in the same
process). The kernel drops both when the process exits, however it exits, so a crash never
leaves a stale lock. Held from the broker's start until its shutdown; owner thread only.
"""

from __future__ import annotations

import fcntl
import os

LOCK_FILE = ".lock"


class LogDirInUseError(Exception):
    """Another process (or broker) holds the lock of this log dir."""

    def __init__(self, log_dir: str, holder: int | None):
        self.log_dir = log_dir
        self.holder = holder
        who = f"process {holder}" if holder is not None else "another process"
        super().__init__(
            f"log dir {log_dir} is in use: {who} holds its lock {os.path.join(log_dir, LOCK_FILE)}"
        )


class DirLock:
    """The ``.lock`` file of one log dir, locked (fcntl and flock) from the broker's start to
    its shutdown; owner thread only."""

    def __init__(self, log_dir: str):
        """Lock ``log_dir``; raises LogDirInUseError, or OSError if the file cannot be opened."""
        self.log_dir = log_dir
        self.path = os.path.join(log_dir, LOCK_FILE)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(fd)
            os.close(fd)
            raise LogDirInUseError(log_dir, holder) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # drops both locks
            self._fd = -1


def _lock_holder(fd: int) -> int | None:
    """The pid holding a lock on the file, from /proc/locks (Linux), if it can be told."""
    st = os.fstat(fd)
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks") as f:
            for line in f:
                fields = line.split()
                # "1: FLOCK  ADVISORY  WRITE 1234 fd:00:5678 0 EOF"; blocked waiters are "->" lines
                if len(fields) >= 6 and fields[1] != "->" and fields[5] == inode:
                    pid = int(fields[4])
                    if pid != os.getpid():
                        return pid
    except (OSError, ValueError):
        pass
    return None
