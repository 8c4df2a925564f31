"""Options: Kafka names with underscores or dotted, clear errors for unknown ones and bad values."""

import pytest

from odradek.client import client_config as config
from odradek.client.client_errors import ConfigError


def test_underscore_and_dotted_names_merge():
    cfg = config.resolve("producer", {"linger.ms": 7, "bootstrap.servers": "h:1"}, {"batch_size": 100})
    assert cfg["linger_ms"] == 7
    assert cfg["batch_size"] == 100
    assert cfg["bootstrap_servers"] == [("h", 1)]


def test_defaults_are_kafkas():
    cfg = config.resolve("producer", None, {"bootstrap_servers": "h:1"})
    assert cfg["acks"] == -1 and cfg["batch_size"] == 16384 and cfg["buffer_memory"] == 33554432
    assert cfg["max_block_ms"] == 60000 and cfg["enable_idempotence"] is True
    c = config.resolve("consumer", None, {"bootstrap_servers": "h:1"})
    assert c["max_poll_records"] == 500 and c["auto_offset_reset"] == "latest"


def test_unknown_option_names_it_and_suggests():
    with pytest.raises(ConfigError, match=r"unknown producer option 'linger_msec'.*'linger_ms'"):
        config.resolve("producer", None, {"bootstrap_servers": "h:1", "linger_msec": 5})
    with pytest.raises(ConfigError, match="unknown consumer option 'acks'"):
        config.resolve("consumer", None, {"bootstrap_servers": "h:1", "acks": 1})


@pytest.mark.parametrize(
    "option,value,message",
    [
        ("acks", "some", "acks must be"),
        ("linger_ms", -1, "linger_ms must be >= 0"),
        ("batch_size", "x", "batch_size must be an integer"),
        ("compression_type", "brotli", "compression_type must be one of"),
        ("enable_idempotence", "maybe", "enable_idempotence must be true or false"),
        ("bootstrap_servers", "", "bootstrap_servers is required"),
        ("transactional_id", 5, "transactional_id must be a non-empty string"),
    ],
)
def test_bad_values_name_the_option(option, value, message):
    with pytest.raises(ConfigError, match=message):
        config.resolve("producer", None, {"bootstrap_servers": "h:1", option: value})


def test_same_option_given_twice_differently():
    with pytest.raises(ConfigError, match="given twice"):
        config.resolve("producer", {"linger.ms": 1}, {"bootstrap_servers": "h:1", "linger_ms": 2})


def test_client_constructors_raise_at_once():
    from odradek import Consumer, Producer

    with pytest.raises(ConfigError, match="unknown producer option"):
        Producer(bootstrap_servers="127.0.0.1:1", nonsense=1)
    with pytest.raises(ConfigError, match="partition_assignment_strategy"):
        Consumer(bootstrap_servers="127.0.0.1:1", group_id="g", partition_assignment_strategy=["nope"])
    with pytest.raises(ConfigError, match="enable_idempotence=True needs acks='all'"):
        Producer(bootstrap_servers="127.0.0.1:1", enable_idempotence=True, acks=1)


def test_import_odradek_is_cheap():
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, odradek; print(any(m.startswith('odradek.client') for m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"
