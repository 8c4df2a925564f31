"""How soon a security change made through one broker applies on another (issue 17, cluster
mode): a ZooKeeper and 3 brokers on SASL_PLAINTEXT/SCRAM-SHA-512 with Kafka's ACL authorizer.

Rows, each from the answer of the request to broker 1 until broker 3 behaves accordingly:
  ACL added        CreateAcls (Write on a topic for a user)  → broker 3's Metadata shows the topic to the user
  ACL deleted      DeleteAcls of it                          → broker 3's Metadata refuses it again
  user created     AlterUserScramCredentials                 → the user logs in on broker 3
  quota set        AlterClientQuotas (producer_byte_rate)    → broker 3's DescribeClientQuotas lists it

Broker 3 is polled every ``--poll-ms`` (a login poll opens a new SCRAM connection each time).

    python benchmarks/cluster_security_bench.py              # 20 rounds
    python benchmarks/cluster_security_bench.py --rounds 5 --poll-ms 5
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from odradek.cluster.controller_channel import BrokerLink  # noqa: E402
from odradek.cluster.zk_security_store import write_scram_credentials  # noqa: E402
from odradek.net.connection_security import ConnectionSecurity  # noqa: E402
from odradek.protocol.messages import build_request  # noqa: E402
from odradek.protocol.sasl_mechanisms import ScramCredential  # noqa: E402
from odradek.testing.embedded_cluster import EmbeddedCluster  # noqa: E402
from odradek.testing.process import free_port  # noqa: E402

MECHANISM = "SCRAM-SHA-512"
LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required"
SETTINGS = {
    "sasl.enabled.mechanisms": MECHANISM,
    "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": f'{LOGIN} username="broker" password="broker-secret";',
    "inter.broker.listener.name": "SASL_PLAINTEXT",
    "sasl.mechanism.inter.broker.protocol": MECHANISM,
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:broker",
}
METADATA = {"allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False}  # fmt: skip


class Links:
    """One SCRAM connection per (broker, user), kept open (BrokerLink reconnects if needed)."""

    def __init__(self, cluster: EmbeddedCluster):
        self.cluster = cluster
        self.links: dict[tuple[int, str], BrokerLink] = {}

    def link(self, broker_id: int, user: str) -> BrokerLink:
        key = (broker_id, user)
        if key not in self.links:
            b = self.cluster.brokers[broker_id]
            security = ConnectionSecurity("SASL_PLAINTEXT", mechanism=MECHANISM, username=user, password=f"{user}-secret")
            self.links[key] = BrokerLink(b.host, b.port, broker_id, "cluster-security-bench", 10, security)
        return self.links[key]

    async def send(self, broker_id: int, user: str, api_key: int, version: int, body: dict):
        return await self.link(broker_id, user).request(api_key, version, build_request(api_key, version, body))

    def close(self) -> None:
        for link in self.links.values():
            link.close()


async def _until(check, poll_s: float, timeout: float = 30.0) -> float:
    """Seconds until ``await check()`` is true."""
    t0 = time.perf_counter()
    while not await check():
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError("the change did not reach broker 3")
        await asyncio.sleep(poll_s)
    return time.perf_counter() - t0


async def one_round(links: Links, n: int, poll_s: float) -> dict[str, float]:
    user, topic = f"user-{n}", "bench"
    acl = {"resource_type": 2, "resource_name": topic, "resource_pattern_type": 3, "principal": f"User:{user}",
           "host": "*", "operation": 4, "permission_type": 3}  # fmt: skip

    async def topic_error() -> int:
        answer = await links.send(3, user, 3, 9, {"topics": [{"name": topic}], **METADATA})
        return int(answer.topics[0].error_code)

    async def logs_in() -> bool:
        b = links.cluster.brokers[3]
        security = ConnectionSecurity("SASL_PLAINTEXT", mechanism=MECHANISM, username=user, password=f"{user}-secret")
        link = BrokerLink(b.host, b.port, 3, "cluster-security-bench", 10, security)
        try:
            await link.request(18, 3, build_request(18, 3, {"client_software_name": "bench", "client_software_version": "1"}))
            return True
        except Exception:
            return False
        finally:
            link.close()

    async def quota_listed() -> bool:
        filters = {"components": [{"entity_type": "client-id", "match_type": 0, "match": f"client-{n}"}], "strict": True}
        answer = await links.send(3, "broker", 48, 1, filters)
        return bool(answer.entries)

    rows = {}
    salt = os.urandom(16)
    upsert = {"name": user, "mechanism": 2, "iterations": 4096, "salt": salt,
              "salted_password": hashlib.pbkdf2_hmac("sha512", f"{user}-secret".encode(), salt, 4096)}  # fmt: skip
    await links.send(1, "broker", 51, 0, {"deletions": [], "upsertions": [upsert]})
    rows["user created"] = await _until(logs_in, poll_s)
    await links.send(1, "broker", 30, 3, {"creations": [acl]})
    rows["ACL added"] = await _until(lambda: _is(topic_error(), 0), poll_s)
    acl_filter = {"resource_type_filter": 2, "resource_name_filter": topic, "pattern_type_filter": 3,
                  "principal_filter": f"User:{user}", "host_filter": "*", "operation": 4, "permission_type": 3}  # fmt: skip
    await links.send(2, "broker", 31, 3, {"filters": [acl_filter]})
    rows["ACL deleted"] = await _until(lambda: _is(topic_error(), 29), poll_s)
    entry = {"entity": [{"entity_type": "client-id", "entity_name": f"client-{n}"}],
             "ops": [{"key": "producer_byte_rate", "value": 1e6, "remove": False}]}  # fmt: skip
    await links.send(1, "broker", 49, 1, {"entries": [entry], "validate_only": False})
    rows["quota set"] = await _until(quota_listed, poll_s)
    return rows


async def _is(value, expected) -> bool:
    return await value == expected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--poll-ms", type=float, default=10)
    args = parser.parse_args()
    cluster = EmbeddedCluster(3, overrides=SETTINGS, client_settings={
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": MECHANISM, "sasl.username": "broker",
        "sasl.password": "broker-secret"})  # fmt: skip
    for b in cluster.brokers.values():
        b.overrides["listeners"] = f"SASL_PLAINTEXT://127.0.0.1:{b.port}"
    # EmbeddedCluster starts its own ZooKeeper in start(): make the brokers' user once it serves
    from odradek.testing.zookeeper import ZooKeeperServer

    cluster.zookeeper = ZooKeeperServer(cluster.data_dir / "zookeeper", port=free_port())
    cluster.zookeeper.start()
    credential = ScramCredential.from_password(MECHANISM, "broker-secret").to_text()
    asyncio.run(write_scram_credentials(cluster.zookeeper_connect, "broker", {MECHANISM: credential}))
    with cluster:
        cluster.create_topic("bench", 1, 3)

        async def run() -> dict[str, list[float]]:
            links = Links(cluster)
            times: dict[str, list[float]] = {}
            try:
                for n in range(args.rounds):
                    for row, seconds in (await one_round(links, n, args.poll_ms / 1000)).items():
                        times.setdefault(row, []).append(seconds * 1000)
            finally:
                links.close()
            return times

        times = asyncio.run(run())
    print(f"{args.rounds} rounds, broker 3 polled every {args.poll_ms:g} ms\n")
    print(f"{'change (on broker 1 or 2)':<28}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}")
    for row, values in times.items():
        values.sort()
        p95 = values[min(len(values) - 1, int(len(values) * 0.95))]
        print(f"{row:<28}{statistics.median(values):>9.1f}{p95:>9.1f}{values[-1]:>9.1f}")


if __name__ == "__main__":
    main()
