"""The leader's assignment of connectors and tasks to workers (Kafka's incremental cooperative assignor).

Work is connectors (task id -1) and tasks. What a worker runs now (its metadata's allocation)
stays with it while it has no more than its fair share (ceil of work / workers), counted apart
for connectors and tasks; the excess is revoked, and a revoking worker rejoins at once so the
next round hands it to the least loaded. Work of a worker that left waits
``scheduled.rebalance.max.delay.ms`` (it may come back) before it is given to the others;
meanwhile every assignment carries the remaining delay. Owned by the event loop.
"""

from __future__ import annotations

import math
import time

from odradek.connect.connect_protocol import CONNECTOR_TASK, Allocation, Assignment, WorkerMetadata

Item = tuple[str, int]


def _to_alloc(items: set[Item]) -> Allocation:
    out: Allocation = {}
    for connector, task in sorted(items):
        out.setdefault(connector, []).append(task)
    return out


def items_of(alloc: Allocation) -> set[Item]:
    return {(c, t) for c, tasks in alloc.items() for t in tasks}


class IncrementalAssignor:
    def __init__(self, max_delay_ms: int):
        self.max_delay_s = max_delay_ms / 1000
        self.previous: dict[Item, str] = {}  # item -> the URL of the worker the last round gave it to
        self.lost_deadline: float | None = None

    def assign(self, leader: str, leader_url: str, config_offset: int, work: set[Item],
               members: dict[str, WorkerMetadata]) -> tuple[dict[str, Assignment], float]:
        """Each member's assignment, and the seconds after which the leader must rebalance again (0: none)."""
        urls = {m: meta.url for m, meta in members.items()}
        present_urls = set(urls.values())
        owned: dict[Item, str] = {}
        for member in sorted(members):
            for item in items_of(members[member].allocation):
                if item in work and item not in owned:
                    owned[item] = member
        lost = {i for i, url in self.previous.items() if url not in present_urls and i in work and i not in owned}
        now = time.monotonic()
        held: set[Item] = set()
        if lost and self.max_delay_s > 0:
            if self.lost_deadline is None:
                self.lost_deadline = now + self.max_delay_s
            if now < self.lost_deadline:
                held = lost
        if not lost or not held:
            self.lost_deadline = None
        loads = {m: set() for m in members}  # type: dict[str, set[Item]]
        revoked = {m: set() for m in members}  # type: dict[str, set[Item]]
        for is_connector in (True, False):
            kind = {i for i in work if (i[1] == CONNECTOR_TASK) == is_connector}
            quota = math.ceil(len(kind) / len(members)) if members else 0
            count = dict.fromkeys(members, 0)
            for item in sorted(kind):
                owner = owned.get(item)
                if owner is None:
                    continue
                if count[owner] < quota:
                    loads[owner].add(item)
                    count[owner] += 1
                else:
                    revoked[owner].add(item)
            for item in sorted(kind):
                if item in owned or item in held:
                    continue
                member = min(sorted(members), key=count.__getitem__)
                loads[member].add(item)
                count[member] += 1
        delay = max(0.0, self.lost_deadline - now) if self.lost_deadline is not None else 0.0
        held_urls = {i: self.previous[i] for i in held}
        self.previous = {i: urls[m] for m, items in loads.items() for i in items}
        self.previous.update(held_urls)  # still theirs until the delay ends
        plan = {
            m: Assignment(0, leader, leader_url, config_offset, _to_alloc(loads[m]), _to_alloc(revoked[m]),
                          int(delay * 1000))
            for m in members
        }
        return plan, delay
