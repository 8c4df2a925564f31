"""Client quotas (KIP-13, KIP-55, KIP-546): produce and fetch byte rates per user, client id,
or both, with Kafka's entity precedence and throttling.

Quotas are stored in the metadata store by entity: ``{"user": name | "<default>" | None,
"client-id": ...}`` → ``{"producer_byte_rate": 1024.0, ...}``. For a request from user U with
client id C the first of these that sets the key applies (Kafka's order):
``(U, C) (U, <default>) (U, -) (<default>, C) (<default>, <default>) (<default>, -) (-, C)
(-, <default>)``, and bytes are counted per matched entity with the default parts replaced by
U and C (each user under a ``<default>`` quota has its own budget).

The rate is Kafka's: ``quota.window.num`` samples of ``quota.window.size.seconds``, divided by
the window's span, which counts at least ``window.num - 1`` samples. When a request takes the
rate over the quota, its throttle time is ``(rate - quota) / quota × window span``, at most
the whole window; the response carries it in ``throttle_time_ms`` and the connection reads
nothing more for that long (KIP-219). ``request_percentage`` is not implemented (refused by
AlterClientQuotas).
"""

from __future__ import annotations

import time
from collections import deque

DEFAULT = "<default>"
SUPPORTED_KEYS = ("producer_byte_rate", "consumer_byte_rate")
ENTITY_TYPES = ("user", "client-id")


class Rate:
    def __init__(self, samples: int, sample_s: float):
        self.samples, self.sample_s = samples, sample_s
        self._windows: deque[list[float]] = deque()  # [start, total]

    def _purge(self, now: float) -> None:
        while self._windows and self._windows[0][0] <= now - self.samples * self.sample_s:
            self._windows.popleft()

    def record(self, value: float, now: float) -> None:
        self._purge(now)
        if not self._windows or now >= self._windows[-1][0] + self.sample_s:
            self._windows.append([now, 0.0])
        self._windows[-1][1] += value

    def span(self, now: float) -> float:
        elapsed = now - self._windows[0][0] if self._windows else 0.0
        full = int(elapsed // self.sample_s)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.sample_s
        return max(elapsed, self.sample_s)

    def measure(self, now: float) -> float:
        self._purge(now)
        return sum(w[1] for w in self._windows) / self.span(now)


def _order(user: str, client: str):
    return (
        ((user, client), (user, client)),
        ((user, DEFAULT), (user, client)),
        ((user, None), (user, None)),
        ((DEFAULT, client), (user, client)),
        ((DEFAULT, DEFAULT), (user, client)),
        ((DEFAULT, None), (user, None)),
        ((None, client), (None, client)),
        ((None, DEFAULT), (None, client)),
    )


class ClientQuotas:
    """The quotas in force and the rates of the entities they apply to."""

    def __init__(self, store, samples: int, sample_s: float, on_change=None):
        self._store = store
        self.samples, self.sample_s = samples, sample_s
        self._rates: dict[tuple, Rate] = {}
        self._on_change = on_change
        self.reload()

    def reload(self) -> None:
        self._quotas = {
            (e.get("user"), e.get("client-id")): dict(q) for e, q in self._store.client_quotas()
        }
        self._rates.clear()
        self.active = bool(self._quotas)
        if self._on_change is not None:
            self._on_change(self)

    def has(self, key: str) -> bool:
        return any(key in q for q in self._quotas.values())

    def entries(self) -> list[tuple[dict, dict]]:
        return [({"user": u, "client-id": c}, dict(q)) for (u, c), q in self._quotas.items()]

    def alter(self, entity: dict, changes: dict) -> None:
        """Set (value) or remove (None) quota keys of one entity."""
        self._store.set_client_quota(entity, changes)
        self.reload()

    def quota(self, key: str, user: str, client: str) -> tuple[float | None, tuple | None]:
        for entity, metric in _order(user, client):
            value = self._quotas.get(entity, {}).get(key)
            if value is not None:
                return value, metric
        return None, None

    def record(self, key: str, principal: str, client_id: str | None, value: float) -> int:
        """Count ``value`` bytes; the throttle time in ms (0 when within the quota)."""
        if not self._quotas:
            return 0
        user = principal.split(":", 1)[1] if ":" in principal else principal
        bound, metric = self.quota(key, user, client_id or "")
        if bound is None:
            return 0
        now = time.monotonic()
        rate = self._rates.get((key, metric))
        if rate is None:
            rate = self._rates[(key, metric)] = Rate(self.samples, self.sample_s)
        rate.record(value, now)
        observed = rate.measure(now)
        if observed <= bound:
            return 0
        throttle = (observed - bound) / max(bound, 1e-9) * rate.span(now)
        return int(min(throttle, self.samples * self.sample_s) * 1000)
