"""Security settings Odradek cannot enforce refuse to start, rather than serve a listener
weaker than configured (issue 12, item 7): a TLS listener without a key store, a SASL
listener with Kafka's default GSSAPI mechanism, client certificates required where no
listener has TLS, an authorizer class Odradek does not have. Security keys no listener uses are
accepted with a warning. Working TLS and SASL listeners are tested in tests/security/."""

from __future__ import annotations

import subprocess
import sys

import pytest
from broker_e2e import log_mentions

from odradek.broker.config import BrokerConfig, ConfigError
from odradek.testing.process import free_port

PLAIN_USERS_ONLY = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'

REFUSED = {
    "sasl_ssl-listener-without-keystore": ({"listeners": "SASL_SSL://127.0.0.1:{port}"}, "ssl.keystore.location"),
    "ssl-listener-without-keystore": ({"listeners": "SSL://127.0.0.1:{port}"}, "ssl.keystore.location"),
    "sasl_plaintext-listener-with-gssapi": (
        {"listeners": "SASL_PLAINTEXT://127.0.0.1:{port}"},
        "sasl.enabled.mechanisms",
    ),
    "sasl-listener-without-jaas-line": (
        {"listeners": "SASL_PLAINTEXT://127.0.0.1:{port}", "sasl.enabled.mechanisms": "PLAIN"},
        "listener.name.sasl_plaintext.plain.sasl.jaas.config",
    ),
    "named-listener-mapped-to-ssl": (
        {
            "listeners": "PLAINTEXT://127.0.0.1:{port},INTERNAL://127.0.0.1:{other}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
        },
        "ssl.keystore.location",
    ),
    "unknown-authorizer-class": (
        {
            "listeners": "PLAINTEXT://127.0.0.1:{port}",
            "authorizer.class.name": "com.example.CustomAuthorizer",
        },
        "authorizer.class.name",
    ),
    "ssl-client-auth-required": (
        {"listeners": "PLAINTEXT://127.0.0.1:{port}", "ssl.client.auth": "required"},
        "ssl.client.auth",
    ),
    # A cluster's brokers log in to each other on inter.broker.listener.name: with Kafka's
    # default GSSAPI, or without the user and password in the listener's JAAS line, they cannot.
    "inter-broker-sasl-with-gssapi": (
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:{port}",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_USERS_ONLY,
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "zookeeper.connect": "127.0.0.1:{other}",
        },
        "sasl.mechanism.inter.broker.protocol",
    ),
    "inter-broker-jaas-without-the-brokers-login": (
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:{port}",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_USERS_ONLY,
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "zookeeper.connect": "127.0.0.1:{other}",
        },
        "listener.name.sasl_plaintext.plain.sasl.jaas.config",
    ),
    "listener-ssl-client-auth-required": (
        {"listeners": "PLAINTEXT://127.0.0.1:{port}", "listener.name.plaintext.ssl.client.auth": "required"},
        "listener.name.plaintext.ssl.client.auth",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_odradek_server_refuses_security_it_cannot_enforce(tmp_path, case):
    settings, key = REFUSED[case]
    port, other = free_port(), free_port()
    cmd = [sys.executable, "-m", "odradek", "server", "--override", f"log.dirs={tmp_path / 'data'}"]
    for name, value in settings.items():
        cmd += ["--override", f"{name}={value.format(port=port, other=other)}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0, f"the broker started with {settings}"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert key in lines[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "data").exists(), "refused before touching the log dirs"


def test_the_first_refused_setting_is_named_by_the_config_check():
    cfg = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093"})
    with pytest.raises(ConfigError) as info:
        cfg.check_security()
    assert info.value.key == "ssl.keystore.location" and "SSL" in str(info.value)
    # Parsing alone still accepts every Kafka listener (tools read such files too).
    assert [e.security_protocol for e in cfg.listeners] == ["PLAINTEXT", "SSL"]


def test_security_keys_no_listener_uses_start_with_a_warning(own_broker):
    b = own_broker(
        **{
            "ssl.keystore.location": "/etc/kafka/keystore.jks",
            "ssl.client.auth": "requested",
            "sasl.enabled.mechanisms": "PLAIN",
        }
    )
    line = log_mentions(b, "no listener uses SSL or SASL")
    assert "ssl.keystore.location" in line and "sasl.enabled.mechanisms" in line
