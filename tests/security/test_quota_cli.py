"""``odradek configs`` for quotas of several entity types at once, as kafka-configs takes them
(issue 17): a user's client id, defaults at any position, ips; describe with Kafka's strict
matching; against a real broker."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from odradek.testing.embedded import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_helpers import run_odradek  # noqa: E402


@pytest.fixture(scope="module")
def b():
    with EmbeddedBroker() as broker:
        yield ["-b", broker.bootstrap_servers]


def configs(b, *args, ok: bool = True):
    r = run_odradek("configs", *args, *b)
    assert (r.code == 0) == ok, r
    return r


def described(b, *entity) -> list:
    return configs(b, "describe", *entity, "-o", "json").json()


USERS_ALICE = ("--entity-type", "users", "--entity-name", "alice")
CLIENTS_APP = ("--entity-type", "clients", "--entity-name", "app")


def test_configs_alter_and_describe_a_users_client_id_defaults_and_ips(b):
    configs(b, "alter", *USERS_ALICE, *CLIENTS_APP, "--add-config", "producer_byte_rate=1024,request_percentage=50")
    configs(b, "alter", *USERS_ALICE, "--add-config", "consumer_byte_rate=2048")
    configs(b, "alter", "--entity-type", "users", "--entity-default", *CLIENTS_APP, "--add-config", "producer_byte_rate=4096")
    configs(b, "alter", "--entity-type", "ips", "--entity-default", "--add-config", "connection_creation_rate=100")
    configs(b, "alter", "--entity-type", "ips", "--entity-name", "10.1.2.3", "--add-config", "connection_creation_rate=5")

    assert described(b, *USERS_ALICE, *CLIENTS_APP) == [
        {"entity": {"user": "alice", "client-id": "app"}, "quotas": {"producer_byte_rate": 1024.0, "request_percentage": 50.0}}
    ]
    # Strict, as kafka-configs: alice's own entity, not her client ids.
    assert described(b, *USERS_ALICE) == [{"entity": {"user": "alice"}, "quotas": {"consumer_byte_rate": 2048.0}}]
    assert described(b, "--entity-type", "users", "--entity-default", *CLIENTS_APP) == [
        {"entity": {"user": None, "client-id": "app"}, "quotas": {"producer_byte_rate": 4096.0}}
    ]
    # A type without a name: every named entity of it (not the default).
    assert described(b, "--entity-type", "users", "--entity-type", "clients") == [
        {"entity": {"user": "alice", "client-id": "app"}, "quotas": {"producer_byte_rate": 1024.0, "request_percentage": 50.0}}
    ]
    assert described(b, "--entity-type", "ips") == [{"entity": {"ip": "10.1.2.3"}, "quotas": {"connection_creation_rate": 5.0}}]
    assert described(b, "--entity-type", "ips", "--entity-default") == [
        {"entity": {"ip": None}, "quotas": {"connection_creation_rate": 100.0}}
    ]
    table = configs(b, "describe", *USERS_ALICE, *CLIENTS_APP).out
    assert "user=alice, client-id=app" in table and "request_percentage" in table, table

    configs(b, "alter", *USERS_ALICE, *CLIENTS_APP, "--delete-config", "producer_byte_rate,request_percentage")
    assert described(b, *USERS_ALICE, *CLIENTS_APP) == []
    configs(b, "alter", "--entity-type", "ips", "--entity-default", "--delete-config", "connection_creation_rate")
    assert described(b, "--entity-type", "ips", "--entity-default") == []


def test_configs_refuses_quota_entities_it_cannot_pair(b):
    r = configs(b, "alter", "--entity-type", "users", *CLIENTS_APP, "--add-config", "producer_byte_rate=1", ok=False)
    assert "after each --entity-type" in r.err, r
    r = configs(b, "alter", "--entity-type", "ips", "--entity-name", "10.0.0.1", *USERS_ALICE, "--add-config", "connection_creation_rate=1", ok=False)
    assert "ips cannot be combined" in r.err, r
    r = configs(b, "alter", "--entity-type", "ips", "--entity-name", "10.0.0.1", "--add-config", "producer_byte_rate=1", ok=False)
    assert "producer_byte_rate" in r.err and "ip" in r.err, r
    r = configs(b, "alter", "--entity-type", "ips", "--entity-name", "host.example", "--add-config", "connection_creation_rate=1", ok=False)
    assert "not an IP address" in r.err, r
