"""Compatibility levels over a per-type reader/writer check: pure functions returning reasons.

BACKWARD: the new schema reads data written with the latest one; FORWARD: the latest reads
data written with the new one; FULL: both. The _TRANSITIVE levels check against every
earlier (not deleted) version instead of the latest only; NONE checks nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
DEFAULT_LEVEL = "BACKWARD"

ReaderReadsWriter = Callable[[object, object], list[str]]


def parse_level(value) -> str | None:
    """The level named by ``value`` (any case), or None when it names none."""
    if not isinstance(value, str):
        return None
    level = value.strip().upper()
    return level if level in LEVELS else None


def check(reads: ReaderReadsWriter, previous: Sequence, new, level: str) -> list[str]:
    """Reasons why ``new`` may not follow ``previous`` (oldest first) under ``level``; [] if it may."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    reasons: list[str] = []
    for old in reversed(against):
        if level.startswith(("BACKWARD", "FULL")):
            reasons += [f"{r} (the new schema cannot read data written with an old one)" for r in reads(new, old)]
        if level.startswith(("FORWARD", "FULL")):
            reasons += [f"{r} (an old schema cannot read data written with the new one)" for r in reads(old, new)]
    return reasons


def allowed(reads: ReaderReadsWriter, old, new, level: str) -> bool:
    return not check(reads, [old], new, level)
