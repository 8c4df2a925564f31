"""`odradek schemas` against a registry process: register, list, get, check, config, mode, delete."""

from __future__ import annotations

import json
import subprocess
import sys


def odradek(url: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "odradek", "schemas", *args, "--url", url],
        input=stdin, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


V1 = json.dumps({"type": "record", "name": "User", "fields": [{"name": "id", "type": "long"}]})
V2_BAD = json.dumps({"type": "record", "name": "User", "fields": [{"name": "id", "type": "long"}, {"name": "e", "type": "string"}]})


def test_the_schemas_command_covers_the_registry(registry, tmp_path):
    url = registry.url
    schema_file = tmp_path / "user.avsc"
    schema_file.write_text(V1)
    done = odradek(url, "register", "users-value", str(schema_file))
    assert (done.returncode, done.stdout.strip()) == (0, "1"), done.stderr
    assert odradek(url, "register", "users-value", "-", stdin=V1).stdout.strip() == "1"
    assert odradek(url, "list").stdout.split() == ["users-value"]
    got = json.loads(odradek(url, "get", "users-value").stdout)
    assert (got["version"], got["id"]) == (1, 1)
    assert json.loads(json.loads(odradek(url, "get", "--id", "1").stdout)["schema"]) == json.loads(V1)
    assert json.loads(odradek(url, "get", "users-value", "--versions").stdout) == [1]
    # check: exit 1 and the reason for an incompatible schema; 0 for a compatible one.
    bad = odradek(url, "check", "users-value", "-", stdin=V2_BAD)
    assert bad.returncode == 1 and "READER_FIELD_MISSING_DEFAULT_VALUE" in bad.stdout
    assert odradek(url, "check", "users-value", str(schema_file)).stdout.strip() == "compatible"
    # Registering it is refused with Confluent's code on stderr.
    refused = odradek(url, "register", "users-value", "-", stdin=V2_BAD)
    assert refused.returncode == 1 and "error 409" in refused.stderr
    assert odradek(url, "config").stdout.strip() == "BACKWARD"
    assert odradek(url, "config", "users-value", "--set", "forward").stdout.strip() == "FORWARD"
    assert odradek(url, "config", "users-value").stdout.strip() == "FORWARD"
    assert odradek(url, "register", "users-value", "-", stdin=V2_BAD).stdout.strip() == "2"
    wrong = odradek(url, "config", "--set", "SIDEWAYS")
    assert wrong.returncode == 1 and "error 42203" in wrong.stderr
    assert odradek(url, "mode", "--set", "readonly").stdout.strip() == "READONLY"
    assert "error 42205" in odradek(url, "delete", "users-value").stderr
    assert odradek(url, "mode", "--set", "READWRITE").stdout.strip() == "READWRITE"
    assert json.loads(odradek(url, "delete", "users-value").stdout) == [1, 2]
    assert json.loads(odradek(url, "delete", "users-value", "--permanent").stdout) == [1, 2]
    assert odradek(url, "list", "--deleted").stdout.split() == []
    unreachable = odradek("http://127.0.0.1:9", "list")
    assert unreachable.returncode == 1 and "cannot reach the registry" in unreachable.stderr
