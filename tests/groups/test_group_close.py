"""A consumer closed at any step of its first join leaves nothing behind in the group.

The Odradek consumer reaches its broker through ``GateProxy``, which stops it at an exact
step of the join (a held answer or request); the test closes it there, lets the held
frames go, and then probes the group with hand-made requests: a group still holding the
closed consumer (a member that never syncs, or a pending member from MEMBER_ID_REQUIRED)
would keep the probe's rebalance waiting for that member's session timeout (30 s here),
far past the probe's deadline.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from typing import NamedTuple

import pytest
from gate_proxy import REQUEST, RESPONSE, GateProxy
from group_raw import RawClient

from odradek import aio
from odradek.protocol.errors import ErrorCode as E
from odradek.testing.process import BrokerProcess

JOIN, LEAVE, SYNC = 11, 13, 14
SUB = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # ConsumerProtocolSubscription v0 of topic "t"
CLOSED_SESSION_MS = 30000  # how long a left-behind member would hold the group
PROBE_DEADLINE_S = 10.0


def new_group() -> str:
    return f"close-{uuid.uuid4().hex[:8]}"


def join_body(group: str, member_id: str = "") -> dict:
    return {
        "group_id": group,
        "session_timeout": 60000,
        "rebalance_timeout": 60000,  # past the probe's deadline: a round ends when all have joined
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": SUB}],
    }


def assert_group_holds_nobody(broker: BrokerProcess, group: str) -> None:
    """Join the group by hand, then rejoin as its leader: both rounds must hold only the probe.

    A left-behind member that joined shows in the first round (or keeps it waiting); a
    pending member (MEMBER_ID_REQUIRED, never joined) keeps the second round waiting, as a
    rebalance closes only when no member is pending.
    """
    with RawClient(broker, timeout=PROBE_DEADLINE_S) as raw:
        first = raw.request(JOIN, 5, join_body(group))
        assert first.error_code == E.member_id_required
        me = first.member_id
        try:
            joined = raw.request(JOIN, 5, join_body(group, me))
            assert joined.error_code == E.none
            assert [m.member_id for m in joined.members] == [me], "a closed consumer is still a member"
            synced = raw.request(
                SYNC,
                3,
                {
                    "group_id": group,
                    "generation_id": joined.generation_id,
                    "member_id": me,
                    "assignments": [{"member_id": me, "assignment": b""}],
                },
            )
            assert synced.error_code == E.none
            again = raw.request(JOIN, 5, join_body(group, me))
        except TimeoutError:
            raise AssertionError(
                f"the probe's rebalance did not finish in {PROBE_DEADLINE_S}s: the group waits for "
                "a member the closed consumer left behind"
            ) from None
        assert again.error_code == E.none and again.generation_id == joined.generation_id + 1
        assert [m.member_id for m in again.members] == [me]
        raw.request(LEAVE, 3, {"group_id": group, "members": [{"member_id": me}]})


def sent(proxy: GateProxy, api: int, group: str, what: str, when=lambda body: True, timeout=20.0):
    """Wait until a request of ``api`` for ``group`` has passed the proxy (to the broker)."""
    return proxy.wait_for(
        lambda e: e.direction == REQUEST and e.api_key == api and e.body.group_id == group and when(e.body),
        timeout,
        what,
    )


class Stage(NamedTuple):
    hold: tuple | None  # (direction, API, predicate on the decoded frame): where the consumer stops
    release_after: int | None = None  # a request the closing consumer must send before the held frames go


STAGES = {
    # its first JoinGroup is unanswered: only the answer (MEMBER_ID_REQUIRED) names its member
    "first-join-unanswered": Stage((RESPONSE, JOIN, lambda b: b.error_code == E.member_id_required)),
    # the JoinGroup with its member id waits in the broker for the join phase to end
    "join-waiting-in-broker": Stage(None),
    # the broker answered the JoinGroup (the member awaits its SyncGroup); the consumer has not seen it
    "join-answered-unseen": Stage((RESPONSE, JOIN, lambda b: b.error_code == E.none), LEAVE),
    # the broker answered the SyncGroup; the consumer has not seen it
    "sync-answered-unseen": Stage((RESPONSE, SYNC, lambda b: True), LEAVE),
}


@pytest.mark.parametrize("stage", list(STAGES))
def test_consumer_closed_during_first_join_leaves_no_phantom_member(gated, stage):
    hold, release_after = STAGES[stage]
    group, topic = new_group(), gated.create_topic()
    proxy = gated.proxy

    async def main():
        gate = proxy.hold(*hold) if hold is not None else None
        consumer = aio.Consumer(
            bootstrap_servers=gated.bootstrap,
            group_id=group,
            session_timeout_ms=CLOSED_SESSION_MS,
            heartbeat_interval_ms=1000,
            max_poll_interval_ms=60000,
        )
        await consumer.start()
        consumer.subscribe([topic])
        try:
            if gate is not None:
                await asyncio.to_thread(gate.wait_closed, 20)
            else:
                what = "the JoinGroup with a member id"
                await asyncio.to_thread(sent, proxy, JOIN, group, what, lambda b: bool(b.member_id))
            closing = asyncio.ensure_future(consumer.close(15))
            await asyncio.sleep(0)  # close() runs to its first wait before anything held is let go
            if release_after is not None:
                await asyncio.to_thread(sent, proxy, release_after, group, "the closing consumer's request")
            if gate is not None:
                gate.release()
            await asyncio.wait_for(closing, 20)
        finally:
            if gate is not None:
                gate.release()
            await consumer.close(1)

    asyncio.run(main())
    leaves = [
        e.body
        for e in proxy.events
        if e.direction == REQUEST and e.api_key == LEAVE and e.body.group_id == group
    ]
    assert len(leaves) == 1 and leaves[0].members[0].member_id, leaves
    assert_group_holds_nobody(gated.broker, group)


def test_cli_consumer_stopped_during_join_leaves_no_phantom_member(gated):
    """`odradek consume --group`, SIGTERMed when the broker has answered its JoinGroup but it has not seen it."""
    group, topic = new_group(), gated.create_topic()
    proxy = gated.proxy
    gate = proxy.hold(
        RESPONSE, JOIN, lambda b: b.error_code == E.none and b.member_id.startswith("odradek-cli")
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "odradek",
            "consume",
            topic,
            "--group",
            group,
            "-b",
            gated.bootstrap,
            "--consumer-property",
            f"session.timeout.ms={CLOSED_SESSION_MS}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        gate.wait_closed(30)
        proc.send_signal(signal.SIGTERM)
        sent(proxy, LEAVE, group, "the CLI consumer's LeaveGroup")
        gate.release()
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err  # interrupted: docs/cli.md's exit status
    finally:
        gate.release()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert_group_holds_nobody(gated.broker, group)
