"""Website activity tracking: the page-view events, and their generator.

Events are JSON page views published to one topic per activity type (``page-views``)::

    {"event_id": "…", "user": "u17", "page": "/products/3", "action": "view", "ts": 1767225600000}

``ts`` is the event time in milliseconds. ``odradek pipeline run page-views`` counts them with a
Kafka Streams topology (``odradek/streams/apps/page_views.py``): views per page per 1-minute
event-time window, each window once, and the all-time top-N pages in a compacted topic.

``generate`` publishes such events: pages follow a Zipf-like popularity, users are
uniform; timestamps are now, or ``start_ms + i * step_ms`` for reproducible runs.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Iterator


def events(
    count: int | None = None,
    *,
    seed: int | None = None,
    pages: int = 50,
    users: int = 1000,
    start_ms: int | None = None,
    step_ms: int = 0,
) -> Iterator[dict]:
    """Page-view events; ``count`` None means forever."""
    rng = random.Random(seed)
    names = [f"/page/{i}" for i in range(pages)]
    weights = [1 / (i + 1) for i in range(pages)]
    i = 0
    while count is None or i < count:
        ts = int(time.time() * 1000) if start_ms is None else start_ms + i * step_ms
        yield {
            "event_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            "user": f"u{rng.randrange(users)}",
            "page": rng.choices(names, weights)[0],
            "action": "view",
            "ts": ts,
        }
        i += 1


def generate(
    bootstrap_servers: str,
    topic: str,
    *,
    rate: float,
    count: int | None = None,
    seed: int | None = None,
    pages: int = 50,
    users: int = 1000,
    start_ms: int | None = None,
    step_ms: int = 0,
    on_progress=None,
    stop=None,
) -> int:
    """Publish events at ``rate`` per second (0: as fast as possible); returns how many.
    Stops early once ``stop`` (a ``threading.Event``) is set."""
    from odradek.pipeline.publish import Publisher

    sent = 0
    started = time.monotonic()
    with Publisher(bootstrap_servers, topic, batch_bytes=256 << 10) as out:
        for event in events(count, seed=seed, pages=pages, users=users, start_ms=start_ms, step_ms=step_ms):
            out.send(json.dumps(event, separators=(",", ":")).encode(), key=event["user"].encode())
            sent += 1
            if stop is not None and stop.is_set():
                break
            if rate > 0:
                ahead = sent / rate - (time.monotonic() - started)
                if ahead > 0.05:
                    out.flush()
                    time.sleep(ahead)
                    if on_progress is not None:
                        on_progress(sent)
    return sent
