"""Crash points for tests: ``ODRADEK_STORAGE_FAULT=<point>`` makes the process SIGKILL itself
when it reaches ``fault_point(<point>)``, so a test can crash a real broker exactly there.

Points:
- the log cleaner's swap, in order (``storage/cleaner.py``, ``storage/log.py``):
  ``cleaner-after-map`` (offset map built), ``cleaner-after-cleaned`` (``.cleaned`` files
  written and fsynced, before the swap), ``cleaner-after-swap`` (``.log.swap`` renamed into
  place: the commit point), ``cleaner-after-old-deleted`` (old segments renamed
  ``.deleted``, swap not yet renamed);
- the transaction coordinator (``broker/txn/transaction_coordinator.py``):
  ``txn-after-prepare`` (the decision written, no marker yet), ``txn-after-markers`` (every
  marker written, not the Complete record).

Points reached in the cleaner's worker process kill the broker (its parent) as well.
Unset (always, outside tests) it costs one comparison per point.
"""

from __future__ import annotations

import os
import signal

FAULT = os.environ.get("ODRADEK_STORAGE_FAULT", "")
IN_CLEANER_WORKER = False  # set by cleaner_worker: a fault there kills the broker too


def fault_point(name: str) -> None:
    if FAULT and FAULT == name:
        if IN_CLEANER_WORKER:
            os.kill(os.getppid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
