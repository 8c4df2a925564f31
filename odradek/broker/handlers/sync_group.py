"""SyncGroup (key 14), v0-v5.

The sync phase: the leader's request carries the assignment, which is written to
``__consumer_offsets`` and then handed to every member; the others wait for it (or, in a
Stable group, get their current assignment at once). v3+ static membership; v5 checks
the protocol type and name against the group's (INCONSISTENT_GROUP_PROTOCOL) and echoes
them. Assignments for unknown members are ignored; members the leader left out get an
empty assignment. In a cluster the group becomes Stable, and the members get their
assignments, only once the group's ``__consumer_offsets`` partition has the assignment in
its ISR (``offsets.commit.timeout.ms``; else every member gets COORDINATOR_NOT_AVAILABLE or
NOT_COORDINATOR and the group rebalances: ``ClassicGroupManager``), so a new coordinator
knows the generation a member was told about, and DescribeGroups never shows it earlier.
"""

from odradek.broker.group.classic_group_member import SyncResult
from odradek.broker.group.group_handler_support import answer_later, coordinator_of
from odradek.broker.handlers import api
from odradek.protocol import errors, messages


@api(14, 0, 5)
def handle_sync_group(broker, request):
    body = request.body
    version = request.api_version

    def respond(result: SyncResult):
        return messages.build_response(
            14,
            version,
            {
                "throttle_time": 0,
                "error_code": result.error,
                "protocol_type": result.protocol_type,
                "protocol_name": result.protocol_name,
                "assignment": result.assignment or b"",
            },
        )

    try:
        coordinator = coordinator_of(broker)
    except errors.KafkaError as exc:
        return respond(SyncResult.failed(exc.code))
    assignments = {a.member_id: bytes(a.assignment) for a in body.assignments}
    return answer_later(
        lambda callback: coordinator.sync_group(
            group_id=body.group_id,
            generation_id=body.generation_id,
            member_id=body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
            protocol_type=getattr(body, "protocol_type", None),
            protocol_name=getattr(body, "protocol_name", None),
            assignments=assignments,
            callback=callback,
        ),
        respond,
    )
