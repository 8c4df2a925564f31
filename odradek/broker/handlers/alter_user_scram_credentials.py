"""AlterUserScramCredentials (key 51), v0 (KIP-554): add, replace or delete users' SCRAM
credentials. The client sends the salt and the salted password (PBKDF2 output), never the
password; the broker keeps the stored and server keys derived from them (metadata store:
the local file, or ``/config/users/<user>`` in ZooKeeper mode). Kafka's checks, one result
per user: empty name or iterations outside 4096..16384 → UNACCEPTABLE_CREDENTIAL, an unknown
mechanism → UNSUPPORTED_SASL_MECHANISM, a user altered twice for one mechanism →
DUPLICATE_RESOURCE, deleting what does not exist → RESOURCE_NOT_FOUND. Needs Alter on the
cluster when an authorizer is configured.
"""

from collections import Counter

from odradek.broker.handlers import api
from odradek.cluster.zk_client import ZooKeeperError
from odradek.protocol import messages
from odradek.protocol.errors import ErrorCode
from odradek.protocol.sasl_mechanisms import MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential

MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {code: name for name, code in MECHANISM_CODES.items()}


@api(51, 0, 0)
def handle_alter_user_scram_credentials(broker, request):
    body = request.body
    users = list(dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions]))
    if not broker.allowed(request, "Alter"):
        return _response(request, {u: (ErrorCode.cluster_authorization_failed, "Not authorized to alter users") for u in users})
    if broker.cluster is not None:
        return _alter_in_cluster(broker, request, users)
    return _response(request, _alter(broker, body, users)[0])


async def _alter_in_cluster(broker, request, users: list[str]):
    """A deletion checks the user's credentials where every broker writes them (another broker
    may have just made them); the answer waits for the ZooKeeper writes."""
    try:
        await broker.store.refresh_users([d.name for d in request.body.deletions])
    except ZooKeeperError as exc:
        return _response(request, {u: (ErrorCode.unknown_server_error, f"cannot read the users from ZooKeeper: {exc}") for u in users})
    outcome, changed = _alter(broker, request.body, users)
    if changed and not await broker.store.written():
        failed = (ErrorCode.unknown_server_error, "writing the credentials to ZooKeeper failed; see the broker's log")
        outcome = {u: failed if code == ErrorCode.none else (code, m) for u, (code, m) in outcome.items()}
    return _response(request, outcome)


def _alter(broker, body, users: list[str]) -> tuple[dict, bool]:
    """Each user's (error code, message), and whether anything was changed."""
    twice = Counter((d.name, d.mechanism) for d in body.deletions) + Counter((u.name, u.mechanism) for u in body.upsertions)
    outcome: dict[str, tuple] = {}
    for user, mechanism in twice:
        if twice[(user, mechanism)] > 1:
            outcome[user] = (ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request")
    stored = broker.store.scram_users()
    checked = []
    for item in [*body.deletions, *body.upsertions]:
        if item.name in outcome:
            continue
        problem = _check(item, stored)
        if problem:
            outcome[item.name] = problem
        else:
            checked.append(item)
    changed = False
    for item in checked:
        if item.name in outcome:  # another item of this user failed: Kafka changes nothing for it
            continue
        mech = MECHANISM_NAMES[item.mechanism]
        if hasattr(item, "salted_password"):
            cred = ScramCredential.from_salted_password(mech, item.salt, item.iterations, item.salted_password)
            broker.store.set_scram_credential(item.name, mech, cred.to_text())
        else:
            broker.store.set_scram_credential(item.name, mech, None)
        changed = True
    return {u: outcome.get(u, (ErrorCode.none, None)) for u in users}, changed


def _check(item, stored) -> tuple | None:
    if not item.name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    mech = MECHANISM_NAMES.get(item.mechanism)
    if mech is None:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    if hasattr(item, "salted_password"):
        if item.iterations < MIN_ITERATIONS:
            return ErrorCode.unacceptable_credential, "Too few iterations"
        if item.iterations > MAX_ITERATIONS:
            return ErrorCode.unacceptable_credential, "Too many iterations"
        if not item.salt or not item.salted_password:
            return ErrorCode.unacceptable_credential, "Salt and salted password must not be empty"
    elif mech not in stored.get(item.name, {}):
        return ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"
    return None


def _response(request, outcome: dict):
    return messages.build_response(
        51,
        request.api_version,
        {
            "throttle_time": 0,
            "results": [{"user": u, "error_code": code, "error_message": msg} for u, (code, msg) in outcome.items()],
        },
    )
