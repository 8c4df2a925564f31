"""The security znodes (issue 17) in Kafka's layout against a real ZooKeeper: ACL bindings
in /kafka-acl and /kafka-acl-extended with their change notifications, and SCRAM
credentials in /config/users/<user> next to quotas, read back into a working SCRAM login."""

from __future__ import annotations

import asyncio
import json

from odradek.cluster import zk_data, zk_security_data
from odradek.cluster.zk_client import ZkClient
from odradek.protocol.acl_model import AclBinding
from odradek.protocol.sasl_mechanisms import ScramClient, ScramCredential, ScramServer


def run(coro):
    return asyncio.run(coro)


BINDINGS = [
    AclBinding("Topic", "LITERAL", "orders", "User:alice", "*", "Read", "Allow"),
    AclBinding("Topic", "LITERAL", "orders", "User:bob", "10.0.0.1", "Write", "Deny"),
    AclBinding("Topic", "PREFIXED", "logs.", "User:etl", "*", "Write", "Allow"),
    AclBinding("TransactionalId", "LITERAL", "tx-1", "User:alice", "*", "Write", "Allow"),
    AclBinding("Cluster", "LITERAL", "kafka-cluster", "User:ops", "*", "IdempotentWrite", "Allow"),
]


def test_acl_bindings_in_kafkas_znodes_and_back(zk_connect):
    async def body():
        async with ZkClient(zk_connect, session_timeout_ms=6000) as zk:
            for path, data in zk_security_data.acl_znodes(BINDINGS).items():
                await zk.create(path, data, makepath=True)
            await zk.create(zk_data.acl_change_path(), zk_data.encode_acl_change("TOPIC", "orders"), sequential=True, makepath=True)
            await zk.create(
                zk_data.acl_change_path("PREFIXED"),
                zk_data.encode_acl_change("TOPIC", "logs.", "PREFIXED"),
                sequential=True,
                makepath=True,
            )
            assert sorted(await zk.get_children("/kafka-acl")) == ["Cluster", "Topic", "TransactionalId"]
            assert await zk.get_children("/kafka-acl-extended/prefixed/Topic") == ["logs."]
            raw, _ = await zk.get("/kafka-acl/Topic/orders")
            # Kafka's JSON: Pascal-case names, as kafka-acls and ZooKeeper-mode brokers write them.
            assert json.loads(raw) == {
                "version": 1,
                "acls": [
                    {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
                    {"principal": "User:bob", "permissionType": "Deny", "operation": "Write", "host": "10.0.0.1"},
                ],
            }
            found = []
            for rtype in await zk.get_children("/kafka-acl"):
                for name in await zk.get_children(f"/kafka-acl/{rtype}"):
                    data, _ = await zk.get(f"/kafka-acl/{rtype}/{name}")
                    found += zk_security_data.acl_bindings(rtype, name, "LITERAL", data)
            data, _ = await zk.get("/kafka-acl-extended/prefixed/Topic/logs.")
            found += zk_security_data.acl_bindings("Topic", "logs.", "PREFIXED", data)
            assert sorted(found, key=str) == sorted(BINDINGS, key=str)
            (change,) = await zk.get_children(zk_data.LITERAL_ACL_CHANGES_PATH)
            assert change.startswith("acl_changes_")
            data, _ = await zk.get(f"{zk_data.LITERAL_ACL_CHANGES_PATH}/{change}")
            assert data == b"TOPIC:orders"
            assert zk_data.decode_acl_change(data) == ("TOPIC", "orders", "LITERAL")

    run(body())


def test_scram_credentials_in_config_users_log_a_user_in(zk_connect):
    async def body():
        async with ZkClient(zk_connect, session_timeout_ms=6000) as zk:
            cred = ScramCredential.from_password("SCRAM-SHA-512", "alice-secret")
            config = zk_security_data.with_scram_credential({"producer_byte_rate": "1024"}, "SCRAM-SHA-512", cred.to_text())
            path = zk_data.entity_config_path(zk_data.USER_CONFIG, "alice")
            assert path == "/config/users/alice"
            await zk.create(path, zk_data.encode_entity_config(config), makepath=True)
            data, _ = await zk.get(path)
            stored = json.loads(data)
            assert stored["version"] == 1 and stored["config"]["producer_byte_rate"] == "1024"
            text = stored["config"]["SCRAM-SHA-512"]
            assert text.startswith("salt=") and ",stored_key=" in text and text.endswith(",iterations=4096")
            assert "alice-secret" not in data.decode()
            creds = zk_security_data.scram_credentials(zk_data.decode_entity_config(data, path))
            assert list(creds) == ["SCRAM-SHA-512"]
            server = ScramServer("SCRAM-SHA-512", lambda user: ScramCredential.from_text("SCRAM-SHA-512", creds["SCRAM-SHA-512"]) if user == "alice" else None)
            client = ScramClient("SCRAM-SHA-512", "alice", "alice-secret")
            final = server.step(client.step(server.step(client.first())))
            assert client.step(final) is None and server.principal == "alice"
            removed = zk_security_data.with_scram_credential(zk_data.decode_entity_config(data, path), "SCRAM-SHA-512", None)
            assert removed == {"producer_byte_rate": "1024"}

    run(body())
