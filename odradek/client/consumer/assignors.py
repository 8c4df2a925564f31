"""Partition assignors: range, roundrobin, sticky and cooperative-sticky; custom ones pluggable.

The group leader runs the assignor the group agreed on over every member's
subscription. An assignor is any object with:

* ``name`` — the protocol name sent in JoinGroup (Kafka's: "range", "roundrobin",
  "sticky", "cooperative-sticky"), so groups can mix this client with Java/librdkafka;
* ``rebalance_protocol`` — "eager" (revoke everything before rejoining) or
  "cooperative" (keep what stays, revoke only what moves; KIP-429);
* ``user_data(assigned, generation) -> bytes | None`` — extra subscription data;
* ``assign(partitions_per_topic, subscriptions) -> {member_id: [TopicPartition]}``.

Subclass ``Assignor`` for a custom one and pass an instance (or the class) in
``partition_assignment_strategy``.

Member order: members sort by ``group_instance_id`` when they have one, then member id
(Kafka's rule), so static members keep their partitions across restarts.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from typing import NamedTuple

from odradek.client.client_errors import ConfigError
from odradek.client.structs import TopicPartition


class Subscription(NamedTuple):
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = []
    generation_id: int = -1
    group_instance_id: str | None = None
    rack_id: str | None = None


def _member_order(subscriptions: dict[str, Subscription]) -> list[str]:
    return sorted(
        subscriptions,
        key=lambda m: (
            subscriptions[m].group_instance_id is None,
            subscriptions[m].group_instance_id or "",
            m,
        ),
    )


class Assignor:
    name = "custom"
    rebalance_protocol = "eager"

    def user_data(self, assigned: set[TopicPartition], generation: int) -> bytes | None:
        return None

    def assign(self, partitions_per_topic: dict[str, int], subscriptions: dict[str, Subscription]):
        raise NotImplementedError

    def on_assignment(self, assigned: set[TopicPartition], generation: int) -> None:
        pass


class RangeAssignor(Assignor):
    """Per topic, consecutive ranges; the first ``partitions % members`` members get one more."""

    name = "range"

    def assign(self, partitions_per_topic, subscriptions):
        out = {m: [] for m in subscriptions}
        order = _member_order(subscriptions)
        for topic in sorted(partitions_per_topic):
            members = [m for m in order if topic in subscriptions[m].topics]
            if not members:
                continue
            n = partitions_per_topic[topic]
            per, extra = divmod(n, len(members))
            start = 0
            for i, m in enumerate(members):
                count = per + (1 if i < extra else 0)
                out[m].extend(TopicPartition(topic, p) for p in range(start, start + count))
                start += count
        return out


class RoundRobinAssignor(Assignor):
    """All partitions sorted, dealt in turn to the members subscribed to each topic."""

    name = "roundrobin"

    def assign(self, partitions_per_topic, subscriptions):
        out = {m: [] for m in subscriptions}
        order = _member_order(subscriptions)
        if not order:
            return out
        i = 0
        for topic in sorted(partitions_per_topic):
            for p in range(partitions_per_topic[topic]):
                for _ in range(len(order)):
                    m = order[i % len(order)]
                    i += 1
                    if topic in subscriptions[m].topics:
                        out[m].append(TopicPartition(topic, p))
                        break
        return out


# Kafka's StickyAssignor user data: [topic string, [partition int32]] + generation int32.
def encode_sticky_user_data(assigned, generation: int) -> bytes:
    by_topic = defaultdict(list)
    for tp in assigned:
        by_topic[tp.topic].append(tp.partition)
    parts = [struct.pack(">i", len(by_topic))]
    for topic in sorted(by_topic):
        raw = topic.encode()
        parts.append(struct.pack(">h", len(raw)) + raw)
        ps = sorted(by_topic[topic])
        parts.append(struct.pack(f">i{len(ps)}i", len(ps), *ps))
    parts.append(struct.pack(">i", generation))
    return b"".join(parts)


def decode_sticky_user_data(data: bytes) -> tuple[list[TopicPartition], int]:
    pos = 0
    (n,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out = []
    for _ in range(n):
        (ln,) = struct.unpack_from(">h", data, pos)
        pos += 2
        topic = data[pos : pos + ln].decode()
        pos += ln
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        parts = struct.unpack_from(f">{count}i", data, pos)
        pos += 4 * count
        out.extend(TopicPartition(topic, p) for p in parts)
    generation = -1
    if len(data) >= pos + 4:
        (generation,) = struct.unpack_from(">i", data, pos)
    return out, generation


class StickyAssignor(Assignor):
    """Balanced (counts differ by at most one where subscriptions allow), moving as little as possible."""

    name = "sticky"

    def user_data(self, assigned, generation):
        return encode_sticky_user_data(assigned, generation)

    def _previous(self, subscriptions):
        """member -> (partitions it owned, generation), from owned_partitions or user data."""
        prev = {}
        for m, sub in subscriptions.items():
            owned, gen = list(sub.owned_partitions or ()), sub.generation_id
            if sub.user_data:
                try:
                    data_owned, data_gen = decode_sticky_user_data(sub.user_data)
                except (struct.error, UnicodeDecodeError, IndexError):
                    data_owned, data_gen = [], -1
                if not owned:
                    owned = data_owned
                if gen < 0:
                    gen = data_gen
            prev[m] = (owned, gen)
        return prev

    def assign(self, partitions_per_topic, subscriptions):
        return balanced_sticky_assign(partitions_per_topic, subscriptions, self._previous(subscriptions))


class CooperativeStickyAssignor(StickyAssignor):
    """Sticky, in cooperative rebalances: a partition moves in two steps (revoke, then assign)."""

    name = "cooperative-sticky"
    rebalance_protocol = "cooperative"

    def user_data(self, assigned, generation):
        return struct.pack(">i", generation)

    def _previous(self, subscriptions):
        prev = {}
        for m, sub in subscriptions.items():
            gen = sub.generation_id
            if gen < 0 and sub.user_data and len(sub.user_data) == 4:
                (gen,) = struct.unpack(">i", sub.user_data)
            prev[m] = (list(sub.owned_partitions or ()), gen)
        return prev

    def assign(self, partitions_per_topic, subscriptions):
        prev = self._previous(subscriptions)
        result = balanced_sticky_assign(partitions_per_topic, subscriptions, prev)
        claims: dict[TopicPartition, set[str]] = defaultdict(set)
        for m, (owned, _) in prev.items():
            for tp in owned:
                claims[tp].add(m)
        # A partition that moves to a member is withheld this round while another member
        # still claims it: that one revokes it and rejoins, and the next rebalance hands it
        # over. A member that claims it itself keeps it (it won any stale claim by a higher
        # generation), whichever order the members come in.
        for m, tps in result.items():
            result[m] = [tp for tp in tps if m in claims[tp] or not claims[tp]]
        return result


def balanced_sticky_assign(partitions_per_topic, subscriptions, previous):
    members = _member_order(subscriptions)
    out: dict[str, list[TopicPartition]] = {m: [] for m in members}
    if not members:
        return out
    subscribed = {m: set(subscriptions[m].topics) for m in members}
    all_tps = [
        TopicPartition(t, p)
        for t in sorted(partitions_per_topic)
        if any(t in subscribed[m] for m in members)
        for p in range(partitions_per_topic[t])
    ]
    valid = set(all_tps)
    potential = {tp: [m for m in members if tp.topic in subscribed[m]] for tp in all_tps}

    # 1. Keep previous ownership; on conflict the highest generation wins.
    claimed: dict[TopicPartition, tuple[int, str]] = {}
    for m in members:
        owned, gen = previous.get(m, ([], -1))
        for tp in owned:
            if tp in valid and tp.topic in subscribed[m]:
                cur = claimed.get(tp)
                if cur is None or gen > cur[0]:
                    claimed[tp] = (gen, m)
    for tp, (_, m) in claimed.items():
        out[m].append(tp)

    # 2. Members keep at most their fair share when all share one subscription.
    same = len({frozenset(s) for s in subscribed.values()}) == 1
    if same:
        total = len(all_tps)
        base, extra = divmod(total, len(members))
        # members already holding more than base get the extra slots first
        order = sorted(members, key=lambda m: -len(out[m]))
        quota = {}
        for m in order:
            if extra and len(out[m]) > base:
                quota[m] = base + 1
                extra -= 1
            else:
                quota[m] = base
        for m in members:
            if len(out[m]) > quota[m]:
                out[m].sort()
                del out[m][quota[m] :]
    assigned = {tp for m in members for tp in out[m]}

    # 3. Hand out the rest: fewest candidates first, to the least loaded candidate.
    unassigned = sorted((tp for tp in all_tps if tp not in assigned), key=lambda tp: (len(potential[tp]), tp))
    for tp in unassigned:
        cands = potential[tp]
        if not cands:
            continue
        m = min(cands, key=lambda c: (len(out[c]), members.index(c)))
        out[m].append(tp)

    # 4. Rebalance: move from the most to the least loaded member while it helps.
    for _ in range(len(all_tps) * len(members)):
        moved = False
        for heavy in sorted(members, key=lambda m: -len(out[m])):
            for tp in sorted(out[heavy], reverse=True):
                light = [c for c in potential[tp] if len(out[c]) + 1 < len(out[heavy])]
                if light:
                    dest = min(light, key=lambda c: (len(out[c]), members.index(c)))
                    out[heavy].remove(tp)
                    out[dest].append(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    for m in members:
        out[m].sort()
    return out


BUILTIN = {
    "range": RangeAssignor,
    "roundrobin": RoundRobinAssignor,
    "sticky": StickyAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}
_ALIASES = {
    "org.apache.kafka.clients.consumer.rangeassignor": "range",
    "org.apache.kafka.clients.consumer.roundrobinassignor": "roundrobin",
    "org.apache.kafka.clients.consumer.stickyassignor": "sticky",
    "org.apache.kafka.clients.consumer.cooperativestickyassignor": "cooperative-sticky",
    "round_robin": "roundrobin",
    "cooperative_sticky": "cooperative-sticky",
}


def make_assignors(spec) -> list:
    out = []
    for item in spec:
        if isinstance(item, str):
            key = item.strip().lower()
            key = _ALIASES.get(key, key)
            cls = BUILTIN.get(key)
            if cls is None:
                raise ConfigError(
                    f"partition_assignment_strategy: unknown assignor {item!r} "
                    f"(built in: {', '.join(BUILTIN)}; or pass an Assignor instance)"
                )
            out.append(cls())
        elif isinstance(item, type):
            out.append(item())
        else:
            if not hasattr(item, "assign") or not hasattr(item, "name"):
                raise ConfigError(f"partition_assignment_strategy: {item!r} has no name/assign")
            out.append(item)
    names = [a.name for a in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"partition_assignment_strategy names an assignor twice: {names}")
    return out
