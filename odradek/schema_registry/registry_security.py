"""Who may use the registry's REST API: HTTP basic authentication and write authorisation.

``RegistrySecurity(verify, authorize)`` is an aiohttp middleware. With ``verify`` set, every
request needs ``Authorization: Basic`` with a user and password that ``verify`` accepts
(401 and ``WWW-Authenticate`` otherwise, as Confluent's registry answers); the principal is
``User:<name>``, as the brokers name a SASL user. Reads are open to every authenticated
principal; a write asks ``authorize(principal, operation, resource_type, name)`` with
Kafka's ACL names, so the brokers' ACLs decide (403 with Confluent's 40301 when they refuse):

* a subject's writes (register, deletes, its config and mode): ``Write`` on the ``Topic``
  named like the subject (a prefixed ACL on ``orders`` covers ``orders-value``,
  ``orders-key`` and ``orders-com.example.Order``);
* the registry-wide config and mode: ``Alter`` on the ``Cluster``.

Accepted passwords are remembered for ``CACHE_S`` (by a digest, never the password), so a
client's every request does not cost a SCRAM key derivation or a SASL exchange.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from odradek.http.authz import Caller
from odradek.protocol.sasl_mechanisms import SCRAM_MECHANISMS, ScramCredential, salted_password

from . import registry_errors as err

ANONYMOUS = "User:ANONYMOUS"
REALM = 'Basic realm="odradek-schema-registry", charset="UTF-8"'
CACHE_S = 60.0

Verify = Callable[[str, str], Awaitable[bool]]
Authorize = Callable[[str, str, str, str], Awaitable[bool]]

# (method, route pattern) of the requests that change the registry, and what they change:
# a subject (``Write`` on ``Topic:<subject>``) or the registry (``Alter`` on the cluster).
SUBJECT_WRITES = {
    ("POST", "/subjects/{subject}/versions"),
    ("DELETE", "/subjects/{subject}"),
    ("DELETE", "/subjects/{subject}/versions/{version}"),
    ("PUT", "/config/{subject}"),
    ("DELETE", "/config/{subject}"),
    ("PUT", "/mode/{subject}"),
    ("DELETE", "/mode/{subject}"),
}
GLOBAL_WRITES = {("PUT", "/config"), ("DELETE", "/config"), ("PUT", "/mode")}


def scram_password_matches(credential: ScramCredential, password: str) -> bool:
    """Whether ``password`` derives the stored key of a SCRAM credential (RFC 5802)."""
    algo = SCRAM_MECHANISMS[credential.mechanism]
    salted = salted_password(algo, password.encode(), credential.salt, credential.iterations)
    derived = ScramCredential.from_salted_password(credential.mechanism, credential.salt, credential.iterations, salted)
    return hmac.compare_digest(derived.stored_key, credential.stored_key)


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """(user, password) of an ``Authorization: Basic`` header, or None."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep and user else None


def unauthorized(message: str) -> web.Response:
    return web.json_response(
        {"error_code": 401, "message": message},
        status=401,
        headers={"WWW-Authenticate": REALM},
        content_type="application/vnd.schemaregistry.v1+json",
    )


class RegistrySecurity:
    def __init__(self, verify: Verify | None = None, authorize: Authorize | None = None):
        self.verify = verify
        self.authorize = authorize
        self._accepted: dict[tuple[str, bytes], float] = {}  # (user, digest) → until (monotonic)

    async def principal(self, request: web.Request) -> str | None:
        """The request's principal; None when its credentials are missing or wrong."""
        if self.verify is None:
            return ANONYMOUS
        creds = basic_credentials(request.headers.get("Authorization"))
        if creds is None:
            return None
        user, password = creds
        key = (user, hashlib.sha256(f"{user}\0{password}".encode()).digest())
        now = time.monotonic()
        if self._accepted.get(key, 0.0) > now:
            return f"User:{user}"
        if not await self.verify(user, password):
            return None
        if len(self._accepted) > 10_000:
            self._accepted = {k: until for k, until in self._accepted.items() if until > now}
        self._accepted[key] = now + CACHE_S
        return f"User:{user}"

    async def refusal(self, principal: str, method: str, route: str, subject: str | None) -> str | None:
        """Why ``principal`` may not make this request, or None."""
        if self.authorize is None:
            return None
        if (method, route) in SUBJECT_WRITES and subject is not None:
            if await self.authorize(principal, "Write", "Topic", subject):
                return None
            return f"User is denied operation Write on Subject: {subject}"
        if (method, route) in GLOBAL_WRITES:
            if await self.authorize(principal, "Alter", "Cluster", "kafka-cluster"):
                return None
            return "User is denied operation Alter on the registry's global config and mode"
        return None

    @web.middleware
    async def middleware(self, request: web.Request, handler):
        principal = await self.principal(request)
        if principal is None:
            return unauthorized(
                "Unauthorized: send HTTP basic credentials of a user the brokers know "
                "(basic.auth.user.info=user:password in Confluent's clients)"
            )
        resource = request.match_info.route.resource
        route = resource.canonical if resource is not None else ""
        refusal = await self.refusal(principal, request.method, route, request.match_info.get("subject"))
        if refusal is not None:
            raise err.RegistryError(403, 40301, refusal)
        request["principal"] = principal
        return await handler(request)


def sasl_verifier(client_options: dict, timeout: float = 10.0) -> Verify:
    """Checks a password the way the brokers would: a SASL exchange as that user, with the
    registry's own connection settings (``kafkastore.security.protocol``, its mechanism and
    TLS) and the user's name and password in place of the registry's."""
    from odradek.aio import Admin
    from odradek.net.connection_errors import is_authentication_failure

    async def verify(user: str, password: str) -> bool:
        options = {**client_options, "sasl_jaas_config": None, "sasl_username": user, "sasl_password": password}
        try:
            async with Admin(**options) as admin:
                await admin.list_topics(timeout=timeout)
        except Exception as exc:
            if is_authentication_failure(exc) or is_authentication_failure(exc.__cause__ or exc):
                return False
            raise err.store_error(f"cannot check {user}'s password with the brokers: {exc}") from None
        return True

    return verify


class BrokerAcls:
    """The brokers' ACLs as the standalone registry sees them: read with DescribeAcls (its
    kafkastore user needs Describe on the cluster) at most every ``refresh_s``, decided by the
    brokers' own Authorizer with the registry's ``super.users`` and
    ``allow.everyone.if.no.acl.found``."""

    def __init__(self, client_options: dict, super_users: frozenset[str], allow_if_no_acl: bool, refresh_s: float = 5.0):
        self.client_options = client_options
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self.refresh_s = refresh_s
        self._authorizer: Any = None  # the brokers' Authorizer over the last ACLs read
        self._read_at = float("-inf")
        self._lock = asyncio.Lock()

    async def _current(self):
        from odradek.aio import Admin
        from odradek.broker.security.authorizer import Authorizer
        from odradek.protocol.acl_model import AclFilter

        async with self._lock:
            if time.monotonic() - self._read_at < self.refresh_s and self._authorizer is not None:
                return self._authorizer
            try:
                async with Admin(**self.client_options) as admin:
                    bindings = await admin.describe_acls(AclFilter(None, None, None, None, None, None, None), timeout=10)
            except Exception as exc:
                raise err.store_error(f"cannot read the brokers' ACLs to authorise a write: {exc}") from None
            self._authorizer = Authorizer(_AclList([b.to_json() for b in bindings]), self.super_users, self.allow_if_no_acl)
            self._read_at = time.monotonic()
            return self._authorizer

    async def authorize(self, principal: str, operation: str, resource_type: str, name: str) -> bool:
        if principal in self.super_users:
            return True
        authorizer = await self._current()
        return authorizer.authorize(Caller(principal), operation, resource_type, name)


class _AclList:
    """The store the Authorizer reads its ACLs from: a list read from the brokers."""

    def __init__(self, items: list[dict]):
        self.items = items

    def acls(self) -> list[dict]:
        return self.items
