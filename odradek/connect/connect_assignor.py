"""The leader's assignment of connectors and tasks to workers (Kafka's incremental cooperative assignor).

Work is connectors (task id -1) and tasks. What a worker runs now (its metadata's allocation)
stays with it while it has no more than its fair share (ceil of work / workers), counted apart
for connectors and tasks; the excess is revoked, and a revoking worker rejoins at once so the
next round hands it to the least loaded.

Lost work is work nobody runs now whose previous owner is not in the group. The previous owner
of an item is the worker this leader gave it to in the last completed generation; a leader that
did not compute that generation (it was just elected, or a round failed) knows nothing of its
own and takes the owners the status topic names instead (``last_owners``: the worker each
connector and task last reported from), so the dead leader's work is lost too, not new. Lost
work waits ``scheduled.rebalance.max.delay.ms`` (its worker may come back) before it is given to
the others; meanwhile every assignment carries the remaining delay. Work whose previous owner is
back in the group (the same worker id, ``host:port``, restarted) returns to it at once. A group
forming afresh (no member runs anything and this leader remembers nothing) waits for nobody.
Owned by the event loop.
"""

from __future__ import annotations

import logging
import math
import time

from odradek.connect.connect_protocol import CONNECTOR_TASK, Allocation, Assignment, WorkerMetadata

log = logging.getLogger("odradek.connect")

Item = tuple[str, int]


def _to_alloc(items: set[Item]) -> Allocation:
    out: Allocation = {}
    for connector, task in sorted(items):
        out.setdefault(connector, []).append(task)
    return out


def items_of(alloc: Allocation) -> set[Item]:
    return {(c, t) for c, tasks in alloc.items() for t in tasks}


def worker_id_of(url: str) -> str:
    """A worker's id (``host:port``, as the status topic names it) from its advertised REST URL."""
    return url.split("://", 1)[-1].rstrip("/")


class IncrementalAssignor:
    def __init__(self, max_delay_ms: int):
        self.max_delay_s = max_delay_ms / 1000
        # item -> the id of the worker the last round gave it to (None: revoked, for the others)
        self.previous: dict[Item, str | None] = {}
        self.previous_generation = -1  # the generation ``previous`` was computed for
        self.lost_deadline: float | None = None

    def assign(self, leader: str, leader_url: str, config_offset: int, work: set[Item],
               members: dict[str, WorkerMetadata], generation: int = -1, last_generation: int = -1,
               last_owners: dict[Item, str] | None = None) -> tuple[dict[str, Assignment], float]:
        """Each member's assignment, and the seconds after which the leader must rebalance again (0: none).

        ``generation`` is this round's, ``last_generation`` the last one this worker completed."""
        if self.previous_generation != last_generation:
            self.previous = {}  # computed for an older generation (or never): not this group's last state
        ids = {m: worker_id_of(meta.url) for m, meta in members.items()}
        member_of_id = {worker_id: m for m, worker_id in sorted(ids.items(), reverse=True)}
        owned: dict[Item, str] = {}
        for member in sorted(members):
            for item in items_of(members[member].allocation):
                if item in work and item not in owned:
                    owned[item] = member
        previous: dict[Item, str | None] = {}
        if owned or self.previous:
            previous = {**(last_owners or {}), **self.previous}
        unowned = {i: worker_id for i in work if i not in owned and (worker_id := previous.get(i))}
        lost = {i for i, worker_id in unowned.items() if worker_id not in member_of_id}
        returning = {i: member_of_id[w] for i, w in unowned.items() if w in member_of_id}
        now = time.monotonic()
        held: set[Item] = set()
        if lost and self.max_delay_s > 0:
            if self.lost_deadline is None:
                self.lost_deadline = now + self.max_delay_s
                log.info("lost connectors and tasks of departed workers %s: %s; held %.0f ms "
                         "(scheduled.rebalance.max.delay.ms) for them to come back",
                         sorted({unowned[i] for i in lost}), sorted(lost), self.max_delay_s * 1000)
            if now < self.lost_deadline:
                held = lost
            else:
                log.info("scheduled.rebalance.max.delay.ms expired: reassigning %s", sorted(lost))
        if not held:
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
                member = returning.get(item) or min(sorted(members), key=count.__getitem__)
                loads[member].add(item)
                count[member] += 1
        delay = round(max(0.0, self.lost_deadline - now), 3) if self.lost_deadline is not None else 0.0
        self.previous = {i: ids[m] for m, items in loads.items() for i in items}
        self.previous.update({i: unowned[i] for i in held})  # still theirs until the delay ends
        self.previous.update({i: None for items in revoked.values() for i in items})
        self.previous_generation = generation
        plan = {
            m: Assignment(0, leader, leader_url, config_offset, _to_alloc(loads[m]), _to_alloc(revoked[m]),
                          int(delay * 1000))
            for m in members
        }
        return plan, delay
