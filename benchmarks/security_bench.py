"""What TLS and SASL cost: produce and consume 1 KB records over PLAINTEXT, SSL and SASL_SSL
(SCRAM-SHA-512) listeners of one broker process, with confluent-kafka; prints a table of
throughput and the broker's CPU per MB.

    python benchmarks/security_bench.py [--mb 64] [--repeat 2] [--authorizer]

With ``--authorizer`` the broker runs the ACL authorizer: PLAINTEXT and SSL clients are
anonymous super users, the SASL_SSL user ``bench`` is allowed by prefixed ACLs (All on
topics ``bench-``, Read on group ``bench``), so its row shows what authorization costs.

Certificates are made on the fly (tests/security/certs.py). One broker serves all three
listeners, so the rows differ only in the listener. CPU is the broker process's
utime+stime (/proc) over each phase, divided by the MB moved.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from _brokers import cpu_seconds

from odradek.testing.process import BrokerProcess, free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "security"))
from certs import KEY_PASSWORD, make_tls_files  # noqa: E402

RECORD = 1024
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


def start_broker(tmp: Path, authorizer: bool = False):
    tls = make_tls_files(tmp / "tls")
    ssl_port, sasl_port = free_port(), free_port()
    broker = BrokerProcess(tmp / "data")
    broker.overrides.update(
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},SSL://127.0.0.1:{ssl_port},SASL_SSL://127.0.0.1:{sasl_port}",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(tls.broker_keystore),
            "ssl.key.password": KEY_PASSWORD,
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM,
            "inter.broker.listener.name": "PLAINTEXT",
        }
    )
    if authorizer:
        broker.overrides.update(
            {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS"}
        )
    broker.start()
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    upsert = UserScramCredentialUpsertion("bench", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"bench-secret")
    for f in admin.alter_user_scram_credentials([upsert]).values():
        f.result(30)
    if authorizer:
        from confluent_kafka.admin import (
            AclBinding,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        allow = AclPermissionType.ALLOW
        bindings = [
            AclBinding(ResourceType.TOPIC, "bench-", ResourcePatternType.PREFIXED, "User:bench", "*", AclOperation.ALL, allow),
            AclBinding(ResourceType.GROUP, "bench", ResourcePatternType.LITERAL, "User:bench", "*", AclOperation.READ, allow),
        ]
        for f in admin.create_acls(bindings).values():
            f.result(30)
    configs = {
        "PLAINTEXT": {"bootstrap.servers": broker.bootstrap_servers},
        "SSL": {"bootstrap.servers": f"127.0.0.1:{ssl_port}", "security.protocol": "SSL", "ssl.ca.location": str(tls.ca)},
        "SASL_SSL": {
            "bootstrap.servers": f"127.0.0.1:{sasl_port}",
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(tls.ca),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "bench",
            "sasl.password": "bench-secret",
        },
    }
    return broker, configs


def produce(conf: dict, topic: str, count: int) -> float:
    from confluent_kafka import Producer

    p = Producer({**conf, "linger.ms": 5, "batch.size": 1 << 20, "acks": 1})
    value = b"x" * RECORD
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    return time.perf_counter() - started


def consume(conf: dict, topic: str, count: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({**conf, "group.id": "bench", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])  # no group join in the timing
    got = 0
    started = time.perf_counter()
    while got < count:
        for m in c.consume(10000, 1.0):
            if not m.error():
                got += 1
    elapsed = time.perf_counter() - started
    c.close()
    return elapsed


def measure(mb: int, repeat: int = 1, authorizer: bool = False) -> list[tuple]:
    """Rows (phase, listener, MB/s, records/s, broker CPU ms per MB): produce then consume
    ``mb`` MB of 1 KB records over each listener of one broker process."""
    count = mb * 1024 * 1024 // RECORD
    rows = []
    with tempfile.TemporaryDirectory(prefix="security-bench-") as tmp:
        broker, configs = start_broker(Path(tmp), authorizer)
        try:
            for run in range(repeat):
                for name, conf in configs.items():
                    topic = f"bench-{name.lower()}-{run}"
                    for phase, fn in (("produce", produce), ("consume", consume)):
                        cpu0 = cpu_seconds(broker.proc.pid)
                        elapsed = fn(conf, topic, count)
                        cpu = cpu_seconds(broker.proc.pid) - cpu0
                        rows.append((phase, name, mb / elapsed, count / elapsed, cpu / mb * 1000))
        finally:
            broker.stop()
    return rows


def print_rows(rows: list[tuple]) -> None:
    print(f"{'phase':8} {'listener':10} {'MB/s':>8} {'records/s':>10} {'broker CPU ms/MB':>17}")
    for phase, name, mbps, rps, cpu_ms in rows:
        print(f"{phase:8} {name:10} {mbps:8.1f} {rps:10.0f} {cpu_ms:17.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=64, help="MB produced (and consumed) per listener")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--authorizer", action="store_true", help="run the ACL authorizer (see above)")
    args = parser.parse_args()
    print_rows(measure(args.mb, args.repeat, args.authorizer))


if __name__ == "__main__":
    main()
