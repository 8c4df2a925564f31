"""Helpers every test directory shares (``tests/`` is on sys.path through its conftest.py)."""

from __future__ import annotations

import time


def wait_until(
    predicate, timeout: float = 10.0, message: str = "condition", *, interval: float = 0.02, step=None
):
    """Poll ``predicate`` until it returns something truthy, and return that; after ``timeout``
    seconds fail with an AssertionError naming ``message``. ``step``, when given, runs before
    each check instead of the ``interval`` sleep (e.g. a consumer's poll, which waits itself)."""
    deadline = time.monotonic() + timeout
    while True:
        if step is not None:
            step()
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        if step is None:
            time.sleep(interval)
