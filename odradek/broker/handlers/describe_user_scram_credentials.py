"""DescribeUserScramCredentials (key 50), v0 (KIP-554): each user's SCRAM mechanisms and
iteration counts (never salts or keys). No users (null, or an empty list, which
confluent-kafka's ``describe_user_scram_credentials()`` sends) means every user, as in Kafka; a user without
credentials gets RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE, as in Kafka.
Needs Describe on the cluster when an authorizer is configured.
"""

from odradek.broker.handlers import api
from odradek.broker.handlers.alter_user_scram_credentials import MECHANISM_CODES
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode


@api(50, 0, 0)
def handle_describe_user_scram_credentials(broker, request):
    allowed = broker.allowed(request, "Describe")
    stored = broker.store.scram_users()
    asked = [u.name for u in request.body.users] if request.body.users else None
    results = []
    if not allowed:
        return _response(request, ErrorCode.cluster_authorization_failed, "Not authorized to describe users", [])
    for user in sorted(stored) if asked is None else asked:
        entry = {"user": user, "error_code": ErrorCode.none, "error_message": None, "credential_infos": []}
        if asked is not None and asked.count(user) > 1:
            entry.update(error_code=ErrorCode.duplicate_resource, error_message=f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}")
        elif user not in stored:
            entry.update(error_code=ErrorCode.resource_not_found, error_message=f"Attempt to describe a user credential that does not exist: {user}")
        else:
            entry["credential_infos"] = [
                {"mechanism": MECHANISM_CODES[mech], "iterations": int(_iterations(text))}
                for mech, text in sorted(stored[user].items())
            ]
        results.append(entry)
    return _response(request, ErrorCode.none, None, results)


def _iterations(text: str) -> str:
    return dict(item.split("=", 1) for item in text.split(","))["iterations"]


def _response(request, code, message, results):
    return messages.build_response(
        50, request.api_version, {"throttle_time": 0, "error_code": code, "error_message": message, "results": results}
    )
