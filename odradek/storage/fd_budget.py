"""The file-descriptor budget: how many partitions can be in use within RLIMIT_NOFILE.

A partition in use holds ``FDS_PER_PARTITION`` descriptors: its active segment's ``.log``,
``.index`` and ``.timeindex`` (an index holds only its mapping's). Idle partitions hold none
(files open on first use, see file_records). A quarter of the limit, at most 4096, stays for
connections, inactive segments being read and everything else.
"""

from __future__ import annotations

import resource

FDS_PER_PARTITION = 3


def open_files_limit() -> int:
    """The soft RLIMIT_NOFILE of this process."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def raise_open_files_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit (what Kafka's service files do with
    LimitNOFILE); returns (before, after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if hard == resource.RLIM_INFINITY:
        try:
            with open("/proc/sys/fs/nr_open") as f:  # the kernel's ceiling for "unlimited"
                target = int(f.read())
        except (OSError, ValueError):
            return soft, soft
    if target <= soft:
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft, soft
    return soft, target


def partition_capacity(limit: int | None = None) -> int:
    """Partitions whose active segments fit in ``limit`` descriptors (default: this process's)."""
    limit = open_files_limit() if limit is None else limit
    reserve = min(max(limit // 4, 64), 4096)
    return max((limit - reserve) // FDS_PER_PARTITION, 0)
