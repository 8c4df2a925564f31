"""The server-side assignors of consumer groups (KIP-848): ``uniform`` and ``range``.

An assignor is a pure function ``(members, topics, previous) -> target`` where ``members``
maps a member id to the topic ids it subscribes to, ``topics`` maps a topic id to its
partition count, ``previous`` is the group's last target assignment and the result maps
every member id to its partitions by topic id. The coordinator picks one by name
(``group.consumer.assignors``; the first is the default, a member may ask for another).

``uniform`` balances the number of partitions per member and is sticky: a partition stays
with its previous owner while that keeps the balance, so a rebalance moves as few
partitions as it can. ``range`` gives each member of a topic's subscribers a contiguous
range of its partitions (members sorted by id, the first ones one more when it does not
divide), so members subscribed to the same topics get the same partition numbers of
co-partitioned topics.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

Assignment = dict[uuid.UUID, frozenset[int]]
Subscriptions = Mapping[str, frozenset[uuid.UUID]]


def _freeze(owned: dict[str, dict[uuid.UUID, set[int]]]) -> dict[str, Assignment]:
    return {m: {t: frozenset(ps) for t, ps in by_topic.items() if ps} for m, by_topic in owned.items()}


def uniform(members: Subscriptions, topics: Mapping[uuid.UUID, int], previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    owned: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    count = dict.fromkeys(members, 0)
    taken: set[tuple[uuid.UUID, int]] = set()
    # keep what each member had, where it still subscribes and the partition still exists
    for member in sorted(members):
        for topic_id, partitions in sorted((previous.get(member) or {}).items()):
            if topic_id not in members[member] or topic_id not in topics:
                continue
            for p in sorted(partitions):
                if p < topics[topic_id] and (topic_id, p) not in taken:
                    taken.add((topic_id, p))
                    owned[member].setdefault(topic_id, set()).add(p)
                    count[member] += 1
    subscribers = {t: sorted(m for m in members if t in members[m]) for t in topics}
    # give out the rest, each to the eligible member with the fewest partitions
    for topic_id in sorted(topics):
        eligible = subscribers[topic_id]
        if not eligible:
            continue
        for p in range(topics[topic_id]):
            if (topic_id, p) in taken:
                continue
            member = min(eligible, key=lambda m: (count[m], m))
            owned[member].setdefault(topic_id, set()).add(p)
            count[member] += 1
            taken.add((topic_id, p))
    # then move partitions from the fullest members to the emptiest that may take them
    moved = True
    while moved:
        moved = False
        for giver in sorted(members, key=lambda m: (-count[m], m)):
            for topic_id in sorted(owned[giver], key=lambda t: -len(owned[giver][t])):
                takers = [m for m in subscribers[topic_id] if count[m] < count[giver] - 1]
                if not takers or not owned[giver][topic_id]:
                    continue
                taker = min(takers, key=lambda m: (count[m], m))
                p = max(owned[giver][topic_id])
                owned[giver][topic_id].discard(p)
                owned[taker].setdefault(topic_id, set()).add(p)
                count[giver] -= 1
                count[taker] += 1
                moved = True
                break
            if moved:
                break
    return _freeze(owned)


def range_(members: Subscriptions, topics: Mapping[uuid.UUID, int], previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    owned: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for topic_id, partitions in topics.items():
        subscribers = sorted(m for m in members if topic_id in members[m])
        if not subscribers:
            continue
        share, extra = divmod(partitions, len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            size = share + (1 if i < extra else 0)
            if size:
                owned[member][topic_id] = set(range(start, start + size))
            start += size
    return _freeze(owned)


ASSIGNORS: dict[str, Callable] = {"uniform": uniform, "range": range_}
