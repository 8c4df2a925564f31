"""The admin client's security calls: SCRAM users (KIP-554) and ACLs (KIP-140), mixed into
``Admin``. Passwords never leave the client: it salts them (PBKDF2 with a random salt) and
sends the salted password, as Kafka's clients do."""

from __future__ import annotations

import os
from dataclasses import dataclass

from odradek.protocol import api_keys
from odradek.protocol.acl_model import (
    AclBinding,
    AclFilter,
    binding_from_wire,
    binding_to_wire,
    filter_to_wire,
)
from odradek.protocol.errors import error_for
from odradek.protocol.messages import to_plain
from odradek.protocol.sasl_mechanisms import SCRAM_MECHANISMS, salted_password

SCRAM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
SCRAM_NAMES = {code: name for name, code in SCRAM_CODES.items()}
DEFAULT_ENTITY = "<default>"  # describe_client_quotas: an entity type's default entity


@dataclass(frozen=True)
class ScramCredentialInfo:
    mechanism: str
    iterations: int


def _mechanism(name: str) -> int:
    try:
        return SCRAM_CODES[name.upper()]
    except KeyError:
        raise ValueError(f"unknown SCRAM mechanism {name!r}; use SCRAM-SHA-256 or SCRAM-SHA-512") from None


class SecurityAdmin:
    """Mixed into ``odradek.client.admin.Admin`` (uses its ``_any`` and ``_t``)."""

    async def describe_user_scram_credentials(
        self, users=None, timeout: float | None = None
    ) -> dict[str, list[ScramCredentialInfo]]:
        """{user: its mechanisms and iteration counts}; ``users`` None lists every user.
        A user without credentials raises ResourceNotFoundError."""
        values = {"users": None if users is None else [{"name": u} for u in users]}
        resp = await self._any(api_keys.DESCRIBE_USER_SCRAM_CREDENTIALS, values, self._t(timeout))
        if resp.error_code:
            raise error_for(int(resp.error_code))(resp.error_message or "DescribeUserScramCredentials")
        out = {}
        for r in resp.results:
            if r.error_code:
                raise error_for(int(r.error_code))(r.error_message or r.user)
            out[r.user] = [
                ScramCredentialInfo(SCRAM_NAMES.get(int(i.mechanism), "UNKNOWN"), int(i.iterations))
                for i in r.credential_infos
            ]
        return out

    async def alter_user_scram_credentials(
        self, upsert=(), delete=(), timeout: float | None = None
    ) -> None:
        """``upsert``: (user, mechanism, password[, iterations]) tuples; ``delete``:
        (user, mechanism) pairs. Raises the first user's error."""
        upsertions = []
        for item in upsert:
            user, mechanism, password, *rest = item
            iterations = rest[0] if rest else 4096
            salt = os.urandom(32)
            algo = SCRAM_MECHANISMS[SCRAM_NAMES[_mechanism(mechanism)]]
            upsertions.append(
                {
                    "name": user,
                    "mechanism": _mechanism(mechanism),
                    "iterations": iterations,
                    "salt": salt,
                    "salted_password": salted_password(algo, password.encode(), salt, iterations),
                }
            )
        deletions = [{"name": user, "mechanism": _mechanism(mechanism)} for user, mechanism in delete]
        resp = await self._any(
            api_keys.ALTER_USER_SCRAM_CREDENTIALS,
            {"deletions": deletions, "upsertions": upsertions},
            self._t(timeout),
        )
        for r in resp.results:
            if r.error_code:
                raise error_for(int(r.error_code))(f"{r.user}: {r.error_message or 'failed'}")


class AclAdmin:
    """ACL calls (KIP-140), mixed into ``Admin``; bindings and filters are
    ``odradek.protocol.acl_model``'s ``AclBinding`` and ``AclFilter`` (Kafka's names)."""

    async def create_acls(self, bindings, timeout: float | None = None) -> None:
        creations = []
        for b in bindings:
            wire = binding_to_wire(b)
            wire["resource_pattern_type"] = wire.pop("pattern_type")
            creations.append(wire)
        resp = await self._any(api_keys.CREATE_ACLS, {"creations": creations}, self._t(timeout))
        for b, r in zip(bindings, resp.results, strict=True):
            if r.error_code:
                raise error_for(int(r.error_code))(f"{b}: {r.error_message or 'refused'}")

    async def describe_acls(self, acl_filter: AclFilter, timeout: float | None = None) -> list[AclBinding]:
        resp = await self._any(api_keys.DESCRIBE_ACLS, filter_to_wire(acl_filter), self._t(timeout))
        if resp.error_code:
            raise error_for(int(resp.error_code))(resp.error_message or "DescribeAcls")
        return [
            binding_from_wire(
                {
                    "resource_type": r.resource_type,
                    "resource_name": r.resource_name,
                    "pattern_type": r.pattern_type,
                    "principal": a.principal,
                    "host": a.host,
                    "operation": a.operation,
                    "permission_type": a.permission_type,
                }
            )
            for r in resp.resources
            for a in r.acls
        ]

    async def delete_acls(self, filters, timeout: float | None = None) -> list[AclBinding]:
        """Delete what the filters match; returns the deleted bindings."""
        resp = await self._any(
            api_keys.DELETE_ACLS, {"filters": [filter_to_wire(f) for f in filters]}, self._t(timeout)
        )
        out = []
        for r in resp.filter_results:
            if r.error_code:
                raise error_for(int(r.error_code))(r.error_message or "DeleteAcls")
            out += [binding_from_wire(to_plain(m)) for m in r.matching_acls]
        return out


class QuotaAdmin:
    """Client quota calls (KIP-546), mixed into ``Admin``. An entity is a dict of
    ``{"user" | "client-id": name or None}`` where None is the default entity."""

    async def alter_client_quotas(
        self, entity: dict, changes: dict, validate_only: bool = False, timeout: float | None = None
    ) -> None:
        """``changes``: {key: number} to set, {key: None} to remove."""
        values = {
            "entries": [
                {
                    "entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
                    "ops": [
                        {"key": k, "value": 0.0 if v is None else float(v), "remove": v is None}
                        for k, v in changes.items()
                    ],
                }
            ],
            "validate_only": validate_only,
        }
        resp = await self._any(api_keys.ALTER_CLIENT_QUOTAS, values, self._t(timeout))
        for r in resp.entries:
            if r.error_code:
                raise error_for(int(r.error_code))(r.error_message or "AlterClientQuotas")

    async def describe_client_quotas(
        self, entities: dict | None = None, strict: bool = False, timeout: float | None = None
    ):
        """[(entity dict, {key: value})]: the quotas of the entities that match ``entities``,
        {entity type: a name, DEFAULT_ENTITY (its default entity) or None (any named one)};
        every quota without it. ``strict``: only entities of exactly those types."""
        components = [
            {
                "entity_type": entity_type,
                "match_type": 1 if name == DEFAULT_ENTITY else 2 if name is None else 0,
                "match": None if name == DEFAULT_ENTITY else name,
            }
            for entity_type, name in (entities or {}).items()
        ]
        resp = await self._any(
            api_keys.DESCRIBE_CLIENT_QUOTAS, {"components": components, "strict": strict}, self._t(timeout)
        )
        if resp.error_code:
            raise error_for(int(resp.error_code))(resp.error_message or "DescribeClientQuotas")
        return [
            ({e.entity_type: e.entity_name for e in entry.entity}, {v.key: v.value for v in entry.values})
            for entry in resp.entries or ()
        ]
