"""Fixtures of the broker tests: small real file systems (tmpfs) to fill up or mount read-only."""

from __future__ import annotations

import os
import subprocess

import pytest


def _mount(path, options: str) -> str | None:
    """Mount a tmpfs at ``path``; returns why it could not, or None."""
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, text=True
    )
    return None if r.returncode == 0 else (r.stderr.strip() or f"mount exited {r.returncode}")


@pytest.fixture
def small_disk(tmp_path):
    """``small_disk(size="8m", read_only=False)``: a fresh tmpfs of that size (a disk that
    really fills up, or a read-only one), unmounted after the test."""
    mounted = []

    def make(size: str = "8m", read_only: bool = False):
        path = tmp_path / f"disk{len(mounted)}"
        options = f"size={size}" + (",ro" if read_only else "")
        problem = _mount(path, options)
        if problem is not None:
            pytest.skip(f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {problem}")
        mounted.append(path)
        return path

    yield make
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.fixture
def fill_disk():
    """``fill_disk(dir)``: take every byte left on the file system holding ``dir`` (a file
    named ``filler`` in it); returns the filler's path, to delete to free the space again."""

    def fill(path):
        filler = path / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for size in (1 << 16, 4096, 512, 1):
                chunk = bytes(size)
                try:
                    while True:
                        os.write(fd, chunk)
                except OSError:
                    pass
        finally:
            os.close(fd)
        return filler

    return fill
