"""ListGroups (key 16), v0-v5.

The groups this broker coordinates (clients ask every broker). v4+ filter by state
(case-insensitive: Empty, PreparingRebalance, CompletingRebalance, Stable; consumer-protocol
groups: Empty, Assigning, Reconciling, Stable), v5+ by type ("classic" or "consumer"). While a ``__consumer_offsets`` partition is still
loading the answer carries COORDINATOR_LOAD_IN_PROGRESS along with the groups known.
"""

from odradek.broker.group.group_handler_support import coordinator_of
from odradek.broker.handlers import api
from odradek.protocol import errors, messages


@api(16, 0, 5)
def handle_list_groups(broker, request):
    body = request.body
    try:
        error, groups = coordinator_of(broker).list_groups(
            list(getattr(body, "states_filter", ()) or ()), list(getattr(body, "types_filter", ()) or ())
        )
    except errors.KafkaError as exc:
        error, groups = exc.code, []
    return messages.build_response(
        16, request.api_version, {"throttle_time": 0, "error_code": error, "groups": groups}
    )
