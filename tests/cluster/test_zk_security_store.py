"""The cluster's security store against a real ZooKeeper (issue 17): ACLs written per resource
with conditional updates, so that two brokers adding ACLs to one resource at once both keep
theirs; change notifications that another store reads; SCRAM credentials and quotas of any
entity and key in Kafka's /config layout, read back by a fresh store (a restarted broker)."""

from __future__ import annotations

import asyncio
import json

import pytest

from odradek.cluster import zk_data
from odradek.cluster.change_notifications import NotificationListener
from odradek.cluster.zk_client import ZkClient, ZooKeeperError
from odradek.cluster.zk_security_store import ZkSecurityStore, write_scram_credentials
from odradek.protocol.acl_model import AclBinding, AclFilter
from odradek.protocol.sasl_mechanisms import ScramCredential


class Store:
    """A ZkSecurityStore as a broker runs it: writes spawned, ``written()`` waits for them."""

    def __init__(self, zk: ZkClient):
        self.tasks: list[asyncio.Task] = []
        self.security = ZkSecurityStore(zk, lambda coro: self.tasks.append(asyncio.get_running_loop().create_task(coro)))

    async def written(self) -> None:
        await asyncio.gather(*self.tasks)


def binding(name: str, principal: str, operation: str = "Read", pattern: str = "LITERAL") -> AclBinding:
    return AclBinding("Topic", pattern, name, principal, "*", operation, "Allow")


def test_two_brokers_adding_acls_to_one_resource_at_once_keep_every_acl(zk_connect):
    async def body():
        async with ZkClient(zk_connect) as zk_a, ZkClient(zk_connect) as zk_b:
            a, b = Store(zk_a), Store(zk_b)
            await a.security.load()
            await b.security.load()
            for i in range(10):  # each broker adds its own ACL to "orders", both at the same moment
                a.security.set_acls([*a.security.acls(), binding("orders", f"User:a{i}").to_json()])
                b.security.set_acls([*b.security.acls(), binding("orders", f"User:b{i}").to_json()])
                await asyncio.gather(a.written(), b.written())
            data, _ = await zk_a.get("/kafka-acl/Topic/orders")
            principals = sorted(e["principal"] for e in json.loads(data)["acls"])
            assert principals == sorted([f"User:a{i}" for i in range(10)] + [f"User:b{i}" for i in range(10)])
            # a removal removes only what it names, whatever else the znode holds by then
            a.security.set_acls([acl for acl in a.security.acls() if acl["principal"] != "User:b3"])
            await a.written()
            fresh = ZkSecurityStore(zk_a, None)
            await fresh.load()
            assert len(fresh.acls()) == 19 and "User:b3" not in {acl["principal"] for acl in fresh.acls()}

    asyncio.run(asyncio.wait_for(body(), 60))


def test_acl_change_notifications_reach_another_store(zk_connect):
    async def body():
        async with ZkClient(zk_connect) as zk_a, ZkClient(zk_connect) as zk_b:
            a, b = Store(zk_a), Store(zk_b)
            changed = []
            b.security.on_acls_changed = lambda: changed.append(len(b.security.acls()))
            listeners = [
                NotificationListener(zk_b, zk_data.LITERAL_ACL_CHANGES_PATH, zk_data.ACL_CHANGE_PREFIX,
                                     lambda data: b.security.on_acl_notification("LITERAL", data)),
                NotificationListener(zk_b, zk_data.EXTENDED_ACL_CHANGES_PATH, zk_data.ACL_CHANGE_PREFIX,
                                     lambda data: b.security.on_acl_notification("PREFIXED", data)),
            ]  # fmt: skip
            for listener in listeners:
                await listener.start()
            await b.security.load()
            assert b.security.acls() == []

            a.security.set_acls([binding("orders", "User:alice").to_json(), binding("ord", "User:bob", "Write", "PREFIXED").to_json()])
            await a.written()
            assert await zk_a.get_children(zk_data.LITERAL_ACL_CHANGES_PATH) == ["acl_changes_0000000000"]
            data, _ = await zk_a.get(f"{zk_data.EXTENDED_ACL_CHANGES_PATH}/acl_changes_0000000000")
            assert json.loads(data) == {"version": 1, "resourceType": "TOPIC", "name": "ord", "patternType": "PREFIXED"}
            for listener in listeners:
                await listener.poll()
            assert sorted(b.security.acls(), key=str) == sorted(a.security.acls(), key=str)
            assert changed, "the authorizer is told"

    asyncio.run(asyncio.wait_for(body(), 60))


def test_scram_credentials_and_quotas_of_any_entity_in_kafkas_config_layout(zk_connect):
    async def body():
        credential = ScramCredential.from_password("SCRAM-SHA-256", "broker-secret").to_text()
        # before any broker runs, as kafka-configs --zookeeper makes the brokers' own user
        await write_scram_credentials(zk_connect, "broker", {"SCRAM-SHA-256": credential})
        async with ZkClient(zk_connect) as zk:
            a = Store(zk)
            await a.security.load()
            assert a.security.scram_credentials("broker") == {"SCRAM-SHA-256": credential}
            a.security.set_scram_credential("alice@corp", "SCRAM-SHA-512", "salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=4096")
            a.security.set_client_quota({"user": "alice@corp", "client-id": None}, {"producer_byte_rate": 2048})
            a.security.set_client_quota({"user": "<default>", "client-id": "app"}, {"request_percentage": 12.5})
            a.security.set_client_quota({"user": None, "client-id": "<default>"}, {"consumer_byte_rate": 1e6})
            a.security.set_client_quota({"ip": "10.0.0.7"}, {"connection_creation_rate": 5})
            await a.written()

            config = json.loads((await zk.get("/config/users/alice%40corp"))[0])["config"]
            assert config["producer_byte_rate"] == "2048" and config["SCRAM-SHA-512"].startswith("salt=")
            assert json.loads((await zk.get("/config/users/<default>/clients/app"))[0]) == {
                "version": 1, "config": {"request_percentage": "12.5"}
            }  # fmt: skip
            assert json.loads((await zk.get("/config/ips/10.0.0.7"))[0])["config"] == {"connection_creation_rate": "5"}
            paths = []
            for child in await zk.get_children(zk_data.CONFIG_CHANGES_PATH):
                paths.append(zk_data.decode_config_change((await zk.get(f"{zk_data.CONFIG_CHANGES_PATH}/{child}"))[0]))
            assert sorted(paths) == sorted(
                ["users/broker", "users/alice%40corp", "users/alice%40corp", "users/<default>/clients/app",
                 "clients/<default>", "ips/10.0.0.7"]
            )  # fmt: skip

            restarted = ZkSecurityStore(zk, None)  # a broker starting reads it all back
            await restarted.load()
            assert set(restarted.scram_users()) == {"broker", "alice@corp"}
            assert sorted(restarted.client_quotas(), key=str) == sorted(
                [
                    ({"user": "alice@corp", "client-id": None}, {"producer_byte_rate": 2048.0}),
                    ({"user": "<default>", "client-id": "app"}, {"request_percentage": 12.5}),
                    ({"user": None, "client-id": "<default>"}, {"consumer_byte_rate": 1e6}),
                    ({"ip": "10.0.0.7"}, {"connection_creation_rate": 5.0}),
                ],
                key=str,
            )
            a.security.set_client_quota({"user": "alice@corp", "client-id": None}, {"producer_byte_rate": None})
            await a.written()
            await restarted.reload_entity("users/alice%40corp")  # what a /config/changes notification does
            assert ({"user": "alice@corp", "client-id": None}, {"producer_byte_rate": 2048.0}) not in restarted.client_quotas()
            assert "SCRAM-SHA-512" in restarted.scram_credentials("alice@corp"), "removing a quota keeps the credential"

    asyncio.run(asyncio.wait_for(body(), 60))


def test_a_change_zookeeper_did_not_take_is_undone_once_it_answers_again(zookeeper, zk_connect):
    """ZooKeeper is down when an ACL is added: the write fails (CreateAcls answers an error),
    and once ZooKeeper serves again the broker reads the znode back, so it does not keep
    enforcing an ACL no other broker has."""

    async def body():
        async with ZkClient(zk_connect, session_timeout_ms=6000, connection_timeout_ms=1000) as zk:
            store = Store(zk)
            await store.security.load()
            zookeeper.stop()
            try:
                store.security.set_acls([binding("orders", "User:eve").to_json()])
                assert store.security.acls(), "in memory at once, as the authorizer reloads"
                with pytest.raises(ZooKeeperError):
                    await store.written()
            finally:
                zookeeper.start()
            deadline = asyncio.get_running_loop().time() + 30
            while store.security.acls() and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.05)
            assert store.security.acls() == [], "read back from ZooKeeper, which never had it"
            await store.security.close()

    asyncio.run(asyncio.wait_for(body(), 60))


def test_delete_acls_filters_read_the_resources_they_name_from_zookeeper_first(zk_connect):
    """A DeleteAcls reaching a broker before the notification of the ACL it deletes still finds
    it: the resources its filters name are read again (literal, prefixed, and for MATCH the
    wildcard and every prefix of the name)."""

    async def body():
        async with ZkClient(zk_connect) as zk_a, ZkClient(zk_connect) as zk_b:
            a, b = Store(zk_a), Store(zk_b)
            await b.security.load()  # b hears of nothing a writes below: no listener
            a.security.set_acls([
                binding("orders", "User:alice").to_json(),
                binding("*", "User:bob").to_json(),
                binding("ord", "User:carol", "Write", "PREFIXED").to_json(),
                binding("payments", "User:dave").to_json(),
            ])  # fmt: skip
            await a.written()
            assert b.security.acls() == []
            await b.security.refresh_acls([AclFilter("Topic", "orders", "MATCH", None, None, None, None)])
            assert {acl["principal"] for acl in b.security.acls()} == {"User:alice", "User:bob", "User:carol"}
            await b.security.refresh_acls([AclFilter("Topic", "payments", "LITERAL", None, None, None, None)])
            assert "User:dave" in {acl["principal"] for acl in b.security.acls()}

    asyncio.run(asyncio.wait_for(body(), 60))
