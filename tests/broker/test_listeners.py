"""Listeners (odradek/broker/listeners.py): listeners, advertised.listeners, the security
protocol map, the inter-broker listener and per-listener keys, as BrokerConfig resolves them."""

from __future__ import annotations

import socket

import pytest

from odradek.broker.config import BrokerConfig
from odradek.broker.listeners import Endpoint, listener_of
from odradek.config_def import ConfigError


def error_for(props) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        BrokerConfig(props)
    return info.value


def test_listener_parsing():
    cfg = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0, client://[::1]:9094 ,REPLICATION://:9095",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENT:SASL_SSL,REPLICATION:SSL",
            "advertised.listeners": "PLAINTEXT://127.0.0.1:0,CLIENT://[::1]:9094,REPLICATION://broker1:9095",
            "inter.broker.listener.name": "replication",
        }
    )
    assert cfg.listeners == [
        Endpoint("PLAINTEXT", "127.0.0.1", 0, "PLAINTEXT"),
        Endpoint("CLIENT", "::1", 9094, "SASL_SSL"),
        Endpoint("REPLICATION", "", 9095, "SSL"),
    ]
    assert str(cfg.listeners[1]) == "CLIENT://[::1]:9094"
    assert cfg.inter_broker_listener_name == "REPLICATION"
    assert cfg.advertised_endpoints({"PLAINTEXT": 40123})[0] == Endpoint(
        "PLAINTEXT", "127.0.0.1", 40123, "PLAINTEXT"
    )


def test_advertised_defaults_to_listeners_and_fills_an_empty_host():
    cfg = BrokerConfig({"listeners": "PLAINTEXT://:9092"})
    assert cfg.listeners[0].host == ""
    assert cfg.advertised_listeners == [Endpoint("PLAINTEXT", socket.gethostname(), 9092, "PLAINTEXT")]


@pytest.mark.parametrize(
    "props, key, fragment",
    [
        ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners", "set advertised.listeners"),
        (
            {"listeners": "PLAINTEXT://0.0.0.0:9092", "advertised.listeners": "PLAINTEXT://0.0.0.0:9092"},
            "advertised.listeners",
            "non-routable address 0.0.0.0",
        ),
        ({"listeners": "PLAINTEXT://[::]:9092"}, "advertised.listeners", "non-routable address ::"),
        ({"listeners": "INTERNAL://h:9092"}, "listeners", "listener.security.protocol.map"),
        ({"listeners": "PLAINTEXT://h:99999"}, "listeners", "between 0 and 65535"),
        ({"listeners": "PLAINTEXT//h:9092"}, "listeners", "NAME://host:port"),
        ({"listeners": "PLAINTEXT://h"}, "listeners", "NAME://host:port"),
        ({"listeners": "PLAINTEXT://a:9092,plaintext://b:9093"}, "listeners", "more than once"),
        (
            {"listeners": "PLAINTEXT://a:9092,SSL://b:9092"},
            "listeners",
            "port 9092 is used by PLAINTEXT, SSL",
        ),
        ({"listeners": ""}, "listeners", "non-empty"),
        ({"advertised.listeners": "SSL://h:9093"}, "advertised.listeners", "not in listeners"),
        (
            {"listener.security.protocol.map": "PLAINTEXT:TLS"},
            "listener.security.protocol.map",
            "PLAINTEXT:TLS",
        ),
        ({"inter.broker.listener.name": "OTHER"}, "inter.broker.listener.name", "OTHER"),
        (
            {"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
            "inter.broker.listener.name",
            "not both",
        ),
        ({"security.inter.broker.protocol": "SSL"}, "security.inter.broker.protocol", "SSL"),
    ],
)
def test_listener_errors(props, key, fragment):
    err = error_for(props)
    assert err.key == key
    assert str(err).startswith(key + ":")
    assert fragment in str(err)


def test_ipv4_and_ipv6_may_share_a_port_and_port_zero_repeats():
    cfg = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://[::1]:9092",
            "advertised.listeners": "PLAINTEXT://127.0.0.1:9092,SSL://[::1]:9092",
        }
    )
    assert len(cfg.listeners) == 2
    cfg = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"})
    assert [e.port for e in cfg.listeners] == [0, 0]


def test_listener_without_protocol_name_falls_back_for_inter_broker():
    cfg = BrokerConfig(
        {"listeners": "CLIENT://127.0.0.1:9092", "listener.security.protocol.map": "CLIENT:PLAINTEXT"}
    )
    assert cfg.inter_broker_listener_name == "CLIENT"


def test_kraft_controller_listener_without_map_defaults_to_plaintext():
    cfg = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "controller.listener.names": "CONTROLLER",
            "process.roles": "broker,controller",
        }
    )
    assert [e.name for e in cfg.listeners] == ["PLAINTEXT"]


def test_per_listener_keys_name_their_listener():
    assert listener_of("listener.name.internal.ssl.keystore.location") == "INTERNAL"
    assert listener_of("ssl.keystore.location") is None
    cfg = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "controller.listener.names": "CONTROLLER",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        }
    )
    assert cfg.get("listener.name.controller.sasl.enabled.mechanisms") == "PLAIN"
    err = error_for({"listener.name.external.ssl.keystore.location": "/ks.jks"})
    assert err.key == "listener.name.external.ssl.keystore.location"
    assert "no listener named EXTERNAL" in str(err)
