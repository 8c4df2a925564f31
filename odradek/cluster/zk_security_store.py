"""ACLs, SCRAM credentials and client quotas of a ZooKeeper-mode cluster, where Kafka keeps
them (the byte layout is ``zk_security_data`` / ``zk_data``):

* ACLs: one znode per resource and pattern, ``/kafka-acl/Topic/orders`` (literal) and
  ``/kafka-acl-extended/prefixed/Topic/ord`` (prefixed), announced by a sequential node in
  ``/kafka-acl-changes`` or ``/kafka-acl-extended-changes`` (Kafka's AclAuthorizer).
* SCRAM credentials and quotas: keys of entity configs, ``/config/users/<user>``,
  ``/config/users/<user>/clients/<client>``, ``/config/clients/<client>``, ``/config/ips/<ip>``
  (``<default>`` entities too), announced in ``/config/changes`` (entity_path ``users/alice``).

Every broker keeps all of it in memory (read at start, then per notification), so the
authorizer, the SASL server and the quota manager read it without waiting. A change is made
in memory at once and written in the background with a conditional read-modify-write of the
one znode it touches: a write that lost a race with another broker (BadVersion) reads the
znode again and reapplies only its own additions and removals, so two brokers adding ACLs to
one resource at the same moment both keep theirs. ``written()`` waits for those writes.
A write that fails (ZooKeeper unreachable) leaves memory ahead of ZooKeeper, so the store reads
that znode again, retrying until ZooKeeper answers: the change is undone here too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from odradek.cluster import zk_data
from odradek.cluster.zk_client import BadVersionError, NodeExistsError, NoNodeError, ZkClient, ZooKeeperError
from odradek.cluster.zk_security_data import SCRAM_CONFIG_KEYS, acl_bindings, acl_znodes, scram_credentials
from odradek.protocol.acl_model import WILDCARD, AclBinding

log = logging.getLogger(__name__)

ACL_ROOTS = ((zk_data.LITERAL_ACL_PATH, "LITERAL"), (f"{zk_data.EXTENDED_ACL_PATH}/prefixed", "PREFIXED"))
QUOTA_ENTITY_TYPES = (zk_data.USER_CONFIG, zk_data.CLIENT_CONFIG, zk_data.IP_CONFIG)
_CONFLICTS = (BadVersionError, NodeExistsError, NoNodeError)  # another writer was first: read again
RESYNC_BACKOFF_S = 1.0

AclKey = tuple[str, str, str]  # (resource type "Topic", pattern type "LITERAL", resource name)


class ZkSecurityStore:
    def __init__(self, zk: ZkClient, spawn: Callable | None):
        self.zk = zk
        self._spawn = spawn  # runs a coroutine in the background, logging its failure
        self._acls: dict[AclKey, list[AclBinding]] = {}
        self._entities: dict[str, dict[str, str]] = {}  # entity path ("users/alice") -> config
        self.on_acls_changed: Callable[[], None] = lambda: None  # the authorizer reloads
        self._resyncs: set[asyncio.Task] = set()

    def _background(self, coro) -> None:
        if self._spawn is None:
            coro.close()
            raise RuntimeError("this ZkSecurityStore only writes when awaited (no spawn given)")
        self._spawn(coro)

    # -- start ---------------------------------------------------------------------------

    async def load(self) -> None:
        """Read every ACL and every user, client and ip config."""
        for root, pattern in ACL_ROOTS:
            await self.zk.ensure_path(root)
            for type_dir in await self.zk.get_children(root):
                for name in await self._children(f"{root}/{type_dir}"):
                    await self.reload_acls(zk_data.enum_name(type_dir), name, pattern)
        for entity_type in QUOTA_ENTITY_TYPES:
            for name in await self._children(f"{zk_data.CONFIG_PATH}/{entity_type}"):
                entity_path = f"{entity_type}/{name}"
                await self.reload_entity(entity_path)
                if entity_type == zk_data.USER_CONFIG:
                    for client in await self._children(f"{zk_data.CONFIG_PATH}/{entity_path}/{zk_data.CLIENT_CONFIG}"):
                        await self.reload_entity(f"{entity_path}/{zk_data.CLIENT_CONFIG}/{client}")

    async def _children(self, path: str) -> list[str]:
        try:
            return await self.zk.get_children(path)
        except NoNodeError:
            return []

    # -- reading what another broker changed -------------------------------------------------

    async def reload_acls(self, resource_type: str, name: str, pattern_type: str) -> None:
        """Read one resource's ACL znode again (``resource_type`` as Kafka's enum name, TOPIC)."""
        key = (zk_data.pascal_case(resource_type), pattern_type, name)
        path = zk_data.acl_path(resource_type, name, pattern_type)
        try:
            data, _ = await self.zk.get(path)
            bindings = acl_bindings(resource_type, name, pattern_type, data)
        except NoNodeError:
            bindings = []
        except zk_data.ZkDataError as exc:
            log.warning("ignoring the ACLs in %s: %s", path, exc)
            bindings = []
        self._put_acls(key, bindings)

    async def refresh_acls(self, filters) -> None:
        """Read again the ACL znodes of the resources ``acl_model.AclFilter`` s name, so that a
        DeleteAcls here finds an ACL another broker added even before its notification arrives.
        Filters naming no resource type or name match from memory."""
        for f in filters:
            if f.resource_type is None or f.name is None:
                continue
            enum_type = zk_data.enum_name(f.resource_type)
            found = []
            if f.pattern_type in (None, "LITERAL", "MATCH"):
                found.append(("LITERAL", f.name))
            if f.pattern_type == "MATCH":
                found.append(("LITERAL", WILDCARD))
                root = f"{zk_data.EXTENDED_ACL_PATH}/prefixed/{zk_data.pascal_case(enum_type)}"
                found += [("PREFIXED", p) for p in await self._children(root) if f.name.startswith(p)]
            if f.pattern_type in (None, "PREFIXED"):
                found.append(("PREFIXED", f.name))
            for pattern, name in found:
                await self.reload_acls(enum_type, name, pattern)

    async def on_acl_notification(self, pattern_type: str, data: bytes) -> None:
        """A ``/kafka-acl-changes`` (LITERAL) or ``/kafka-acl-extended-changes`` notification."""
        try:
            resource_type, name, pattern = zk_data.decode_acl_change(data, pattern_type)
        except zk_data.ZkDataError as exc:
            log.warning("ignoring an ACL change notification: %s", exc)
            return
        await self.reload_acls(resource_type, name, pattern)
        self.on_acls_changed()

    async def reload_entity(self, entity_path: str) -> None:
        """Read ``/config/<entity_path>`` (``users/alice``, ``users/a/clients/c``) again."""
        path = f"{zk_data.CONFIG_PATH}/{entity_path}"
        try:
            data, _ = await self.zk.get(path)
            config = zk_data.decode_entity_config(data, path)
        except NoNodeError:
            config = {}
        except zk_data.ZkDataError as exc:
            log.warning("ignoring %s: %s", path, exc)
            config = {}
        self._put_entity(entity_path, config)

    def _put_acls(self, key: AclKey, bindings: list[AclBinding]) -> None:
        if bindings:
            self._acls[key] = list(bindings)
        else:
            self._acls.pop(key, None)

    def _put_entity(self, entity_path: str, config: dict[str, str]) -> None:
        if config:
            self._entities[entity_path] = dict(config)
        else:
            self._entities.pop(entity_path, None)

    # -- ACLs ----------------------------------------------------------------------------------

    def acls(self) -> list[dict]:
        return [b.to_json() for bindings in self._acls.values() for b in bindings]

    def set_acls(self, acls: list[dict]) -> None:
        """The authorizer's whole new list: write only the resources whose ACLs differ."""
        wanted: dict[AclKey, list[AclBinding]] = {}
        for data in acls:
            b = AclBinding.from_json(data)
            wanted.setdefault((b.resource_type, b.pattern_type, b.name), []).append(b)
        for key in set(wanted) | set(self._acls):
            new, old = wanted.get(key, []), self._acls.get(key, [])
            added = [b for b in new if b not in old]
            removed = [b for b in old if b not in new]
            if added or removed:
                self._put_acls(key, new)
                self._background(self._write_acls(key, added, removed))

    async def _write_acls(self, key: AclKey, added: list[AclBinding], removed: list[AclBinding]) -> None:
        resource_type, pattern, name = key
        enum_type = zk_data.enum_name(resource_type)
        try:
            merged = await self._merge_acls(key, enum_type, added, removed)
        except ZooKeeperError:
            self._resync(lambda: self._reload_and_tell(enum_type, name, pattern))
            raise
        self._put_acls(key, merged)
        self.on_acls_changed()

    async def _reload_and_tell(self, resource_type: str, name: str, pattern: str) -> None:
        await self.reload_acls(resource_type, name, pattern)
        self.on_acls_changed()

    async def _merge_acls(
        self, key: AclKey, enum_type: str, added: list[AclBinding], removed: list[AclBinding]
    ) -> list[AclBinding]:
        """Apply ``added`` and ``removed`` to the resource's znode as it is now; the result."""
        resource_type, pattern, name = key
        path = zk_data.acl_path(enum_type, name, pattern)
        while True:
            data, version = await self._read_versioned(path)
            current = acl_bindings(enum_type, name, pattern, data)
            merged = [b for b in current if b not in removed] + [b for b in dict.fromkeys(added) if b not in current]
            try:
                if merged == current:
                    return merged
                if not merged:
                    await self.zk.delete(path, version=version if version is not None else -1)
                elif version is None:
                    await self.zk.create(path, acl_znodes(merged)[path], makepath=True)
                else:
                    await self.zk.set(path, acl_znodes(merged)[path], version=version)
            except _CONFLICTS:
                continue
            await self.zk.create(
                zk_data.acl_change_path(pattern), zk_data.encode_acl_change(enum_type, name, pattern), sequential=True, makepath=True
            )
            return merged

    async def _read_versioned(self, path: str) -> tuple[bytes, int | None]:
        """A znode's data and the version to write it back at (None: absent, create it)."""
        try:
            data, stat = await self.zk.get(path)
        except NoNodeError:
            return b"", None
        return data, stat.version

    # -- SCRAM credentials ----------------------------------------------------------------------

    def scram_credentials(self, user: str) -> dict[str, str]:
        return scram_credentials(self._entities.get(zk_data.config_entity_path(zk_data.USER_CONFIG, user), {}))

    def scram_users(self) -> dict[str, dict[str, str]]:
        users = {}
        for entity_path, config in self._entities.items():
            entity_type, _, name = entity_path.partition("/")
            credentials = scram_credentials(config)
            if entity_type == zk_data.USER_CONFIG and "/" not in name and credentials:
                users[_name(name)] = credentials
        return users

    def set_scram_credential(self, user: str, mechanism: str, credential: str | None) -> None:
        if mechanism not in SCRAM_CONFIG_KEYS:
            raise ValueError(f"unknown SCRAM mechanism {mechanism!r}; expected one of {', '.join(SCRAM_CONFIG_KEYS)}")
        self._alter_entity(zk_data.config_entity_path(zk_data.USER_CONFIG, user), {mechanism: credential})

    # -- client quotas ---------------------------------------------------------------------------

    def client_quotas(self) -> list[tuple[dict, dict]]:
        """Every entity with quota keys (any key but a SCRAM credential, as a number)."""
        found = []
        for entity_path, config in self._entities.items():
            quotas = {}
            for key, value in config.items():
                if key in SCRAM_CONFIG_KEYS:
                    continue
                try:
                    quotas[key] = float(value)
                except ValueError:
                    log.warning("ignoring quota %s=%r of /config/%s: not a number", key, value, entity_path)
            if quotas:
                found.append((_entity(entity_path), quotas))
        return found

    def set_client_quota(self, entity: dict, changes: dict) -> None:
        self._alter_entity(
            _entity_path(entity), {k: None if v is None else _number_text(v) for k, v in changes.items()}
        )

    # -- entity configs ----------------------------------------------------------------------------

    def _alter_entity(self, entity_path: str, changes: dict[str, str | None]) -> None:
        config = dict(self._entities.get(entity_path, {}))
        _apply(config, changes)
        self._put_entity(entity_path, config)
        self._background(self._write_or_resync(entity_path, changes))

    async def _write_or_resync(self, entity_path: str, changes: dict[str, str | None]) -> None:
        try:
            await self.write_entity(entity_path, changes)
        except ZooKeeperError:
            self._resync(lambda: self.reload_entity(entity_path))
            raise

    def _resync(self, read: Callable[[], Awaitable[None]]) -> None:
        """Read a znode whose write failed again, until ZooKeeper answers."""

        async def retry() -> None:
            while True:
                try:
                    await read()
                    return
                except ZooKeeperError as exc:
                    log.info("cannot read back a security znode whose write failed (%s); retrying", exc)
                    await asyncio.sleep(RESYNC_BACKOFF_S)

        task = asyncio.get_running_loop().create_task(retry(), name="zk-security-resync")
        self._resyncs.add(task)
        task.add_done_callback(self._resyncs.discard)

    async def close(self) -> None:
        tasks = list(self._resyncs)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def write_entity(self, entity_path: str, changes: dict[str, str | None]) -> None:
        """Set (or with None remove) keys of ``/config/<entity_path>``. Kafka's order: the
        entity's znode (conditionally: its other keys may be changing elsewhere), then a
        /config/changes notification."""
        path = f"{zk_data.CONFIG_PATH}/{entity_path}"
        while True:
            data, version = await self._read_versioned(path)
            config = zk_data.decode_entity_config(data, path)
            _apply(config, changes)
            try:
                if version is None:
                    await self.zk.create(path, zk_data.encode_entity_config(config), makepath=True)
                else:
                    await self.zk.set(path, zk_data.encode_entity_config(config), version=version)
            except _CONFLICTS:
                continue
            break
        await self.zk.create(
            zk_data.config_change_path(), zk_data.encode_config_change(entity_path), sequential=True, makepath=True
        )
        self._put_entity(entity_path, config)


async def write_scram_credentials(zookeeper_connect: str, user: str, credentials: dict[str, str]) -> None:
    """Set ``user``'s SCRAM credentials ({mechanism: ``ScramCredential.to_text()``}) straight in
    ZooKeeper, as ``kafka-configs --zookeeper`` does: how the brokers' own user is made
    before a SASL/SCRAM cluster starts (the brokers need it to reach each other)."""
    zk = ZkClient.from_config({"zookeeper.connect": zookeeper_connect})
    await zk.start()
    try:
        await ZkSecurityStore(zk, spawn=None).write_entity(zk_data.config_entity_path(zk_data.USER_CONFIG, user), dict(credentials))
    finally:
        await zk.close()


def _apply(config: dict[str, str], changes: dict[str, str | None]) -> None:
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value


def _name(part: str) -> str:
    return part if part == zk_data.DEFAULT_ENTITY else zk_data.desanitize(part)


def _entity(entity_path: str) -> dict:
    """``users/alice/clients/app`` → {"user": "alice", "client-id": "app"}; ``ips/10.0.0.1`` →
    {"ip": "10.0.0.1"}: the store interface's entity (a part is a name, <default> or None)."""
    parts = entity_path.split("/")
    if parts[0] == zk_data.IP_CONFIG:
        return {"ip": _name(parts[1])}
    if parts[0] == zk_data.CLIENT_CONFIG:
        return {"user": None, "client-id": _name(parts[1])}
    client = _name(parts[3]) if len(parts) == 4 else None
    return {"user": _name(parts[1]), "client-id": client}


def _entity_path(entity: dict) -> str:
    """The reverse of ``_entity``: where Kafka keeps an entity's quotas."""
    user, client, ip = entity.get("user"), entity.get("client-id"), entity.get("ip")
    if ip is not None:
        if user is not None or client is not None:
            raise ValueError("an ip quota entity names no user or client id")
        return zk_data.config_entity_path(zk_data.IP_CONFIG, ip)
    if user is not None and client is not None:
        return zk_data.user_client_entity_path(user, client)
    if user is not None:
        return zk_data.config_entity_path(zk_data.USER_CONFIG, user)
    if client is not None:
        return zk_data.config_entity_path(zk_data.CLIENT_CONFIG, client)
    raise ValueError("a quota entity names a user, a client id or an ip")


def _number_text(value) -> str:
    """A quota as Kafka's tools write it: ``1024`` for a whole number, else the decimal."""
    number = float(value)
    return str(int(number)) if number.is_integer() else repr(number)
