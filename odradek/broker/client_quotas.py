"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-546, KIP-612): produce and fetch byte rates and
request-time percentages per user, client id, or both, with Kafka's entity precedence and
throttling; connection creation rates per IP address.

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
nothing more for that long (KIP-219).

``request_percentage`` (KIP-124) is a share of one thread's time, in percent, measured over the
same window. Odradek runs on one event loop, so a request's time is what the loop spent on it:
parsing, handling and encoding its response (``broker/request_time_quota.py``). Its throttle
time is capped at one sample (``quota.window.size.seconds``), as Kafka caps it.

IP entities (KIP-612) are ``{"ip": address | "<default>"}`` → ``{"connection_creation_rate":
n}``: the specific address first, else ``<default>``. A connection that takes its address's
rate of new connections over the quota is not counted, and is closed after the throttle time.
"""

from __future__ import annotations

import time
from collections import deque

DEFAULT = "<default>"
REQUEST_PERCENTAGE = "request_percentage"
SUPPORTED_KEYS = ("producer_byte_rate", "consumer_byte_rate", REQUEST_PERCENTAGE)
ENTITY_TYPES = ("user", "client-id")
IP_ENTITY = "ip"
IP_KEYS = ("connection_creation_rate",)
_NS_TO_PERCENT_SECONDS = 100 / 1e9  # a second of loop time is 100 %·s


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
        self._quotas = {}
        self._ip_quotas: dict[str, dict] = {}
        for e, q in self._store.client_quotas():
            if e.get(IP_ENTITY) is not None:
                self._ip_quotas[e[IP_ENTITY]] = dict(q)
            else:
                self._quotas[(e.get("user"), e.get("client-id"))] = dict(q)
        self._rates.clear()
        self._ip_rates: dict[str, Rate] = {}
        self.active = bool(self._quotas)
        self.request_time = self.has(REQUEST_PERCENTAGE)
        self.ip_active = bool(self._ip_quotas)
        if self._on_change is not None:
            self._on_change(self)

    def has(self, key: str) -> bool:
        return any(key in q for q in self._quotas.values())

    def entries(self) -> list[tuple[dict, dict]]:
        users = [({"user": u, "client-id": c}, dict(q)) for (u, c), q in self._quotas.items()]
        return users + [({IP_ENTITY: ip}, dict(q)) for ip, q in self._ip_quotas.items()]

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

    def record(
        self, key: str, principal: str, client_id: str | None, value: float, max_throttle_s: float | None = None
    ) -> int:
        """Count ``value`` (bytes, or %·s of request time); the throttle time in ms (0 when
        within the quota), at most ``max_throttle_s`` (default: the whole window)."""
        found = self._rate(key, principal, client_id)
        if found is None:
            return 0
        rate, bound = found
        now = time.monotonic()
        rate.record(value, now)
        observed = rate.measure(now)
        if observed <= bound:
            return 0
        return _throttle_ms(observed, bound, rate.span(now), max_throttle_s or self.samples * self.sample_s)

    def unrecord(self, key: str, principal: str, client_id: str | None, value: float) -> None:
        """Take back ``value`` counted by ``record``: bytes a throttled answer did not send."""
        found = self._rate(key, principal, client_id)
        if found is not None:
            found[0].record(-value, time.monotonic())

    def most_in_window(self, key: str, principal: str, client_id: str | None) -> float | None:
        """The most one request may count toward ``key`` without a throttle when the window
        held nothing else: the quota over the shortest span a rate is measured on (None: no
        quota)."""
        bound, _ = self._quota_of(key, principal, client_id)
        return None if bound is None else bound * max(self.samples - 1, 1) * self.sample_s

    def _quota_of(self, key: str, principal: str, client_id: str | None) -> tuple[float | None, tuple | None]:
        """``quota`` for a request's principal ("User:name") and client id."""
        if not self._quotas:
            return None, None
        user = principal.split(":", 1)[1] if ":" in principal else principal
        return self.quota(key, user, client_id or "")

    def _rate(self, key: str, principal: str, client_id: str | None) -> tuple[Rate, float] | None:
        """The rate ``key`` is counted in for this principal and client id, and its quota."""
        bound, metric = self._quota_of(key, principal, client_id)
        if bound is None:
            return None
        rate = self._rates.get((key, metric))
        if rate is None:
            rate = self._rates[(key, metric)] = Rate(self.samples, self.sample_s)
        return rate, bound

    def record_request_time(self, principal: str, client_id: str | None, nanos: int) -> int:
        """Charge ``nanos`` of loop time to the request quota; the throttle time in ms."""
        return self.record(REQUEST_PERCENTAGE, principal, client_id, nanos * _NS_TO_PERCENT_SECONDS, self.sample_s)

    def ip_quota(self, ip: str) -> float | None:
        quotas = self._ip_quotas.get(ip)
        if quotas is None or "connection_creation_rate" not in quotas:
            quotas = self._ip_quotas.get(DEFAULT, {})
        return quotas.get("connection_creation_rate")

    def record_connection(self, ip: str) -> int:
        """A new connection from ``ip``: 0 to accept it, else the ms after which to close it
        (it is then not counted, as Kafka does not count a throttled connection)."""
        bound = self.ip_quota(ip) if self._ip_quotas else None
        if bound is None:
            return 0
        now = time.monotonic()
        rate = self._ip_rates.get(ip)
        if rate is None:
            rate = self._ip_rates[ip] = Rate(self.samples, self.sample_s)
        rate.record(1, now)
        observed = rate.measure(now)
        if observed <= bound:
            return 0
        rate.record(-1, now)
        return max(1, _throttle_ms(observed, bound, rate.span(now), self.samples * self.sample_s))


def _throttle_ms(observed: float, bound: float, span_s: float, max_s: float) -> int:
    """Kafka's throttle time: how long until the rate falls back to the quota."""
    throttle = (observed - bound) / max(bound, 1e-9) * span_s
    return int(min(throttle, max_s) * 1000)
