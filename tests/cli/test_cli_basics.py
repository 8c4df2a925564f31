"""Help, exit codes, the unreachable-broker message, --command-config, and a lean `odradek server` start."""

from __future__ import annotations

import subprocess
import sys

import click
from cli_helpers import run_odradek
from click.testing import CliRunner

from odradek.cli.main import cli


def _all_commands():
    """Every (path, command) of the `odradek` tree, lazily-loaded ones included."""
    ctx = click.Context(cli)
    out = []

    def walk(group, path):
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            out.append((path + [name], cmd))
            if isinstance(cmd, click.Group):
                walk(cmd, path + [name])

    walk(cli, [])
    return out


def test_every_command_has_help_with_examples():
    runner = CliRunner()
    commands = _all_commands()
    names = {" ".join(p) for p, _ in commands}
    for expected in [
        "topics create", "topics list", "topics describe", "topics alter", "topics delete", "produce", "consume",
        "groups list", "groups describe", "groups delete", "groups reset-offsets", "configs describe",
        "configs alter", "offsets", "cluster", "perf produce", "perf consume", "server", "dump-log",
    ]:  # fmt: skip
        assert expected in names, expected
    mine = [(p, c) for p, c in commands if p[0] not in ("pipeline",)]
    for path, _cmd in mine:
        result = runner.invoke(cli, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "Usage: " in result.output
        assert "Examples:" in result.output, path
        assert "odradek " in result.output.split("Examples:", 1)[1], path


def test_top_level_help_lists_commands_without_importing_them():
    r = run_odradek("--help")
    assert r.code == 0, r
    for name in (
        "server",
        "topics",
        "produce",
        "consume",
        "groups",
        "configs",
        "offsets",
        "cluster",
        "perf",
        "dump-log",
    ):
        assert f"  {name} " in r.out, name
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, odradek.cli.main; print(sorted(m for m in sys.modules if m.startswith(('odradek.client', 'odradek.broker', 'rich', 'kio'))))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.strip() == "[]", probe.stdout  # `odradek server` pays only for what it uses


def test_unknown_command_and_bad_option_exit_2():
    assert run_odradek("nonsense").code == 2
    r = run_odradek("topics", "list", "--output", "yaml")
    assert r.code == 2 and "yaml" in r.err


def test_unreachable_broker_names_address_and_fix():
    r = run_odradek("topics", "list", "--bootstrap-server", "127.0.0.1:1")
    assert r.code == 1, r
    assert "cannot reach a broker at 127.0.0.1:1" in r.err
    assert "odradek server" in r.err
    env = run_odradek("cluster", env={"ODRADEK_BOOTSTRAP_SERVER": "127.0.0.1:2"})
    assert env.code == 1 and "127.0.0.1:2" in env.err


def test_command_config_file(odradek, tmp_path, broker):
    good = tmp_path / "client.properties"
    good.write_text("# Kafka client properties\nrequest.timeout.ms=5000\nclient.id=ops-cli\nlinger.ms=1\n")
    r = odradek("cluster", "--command-config", good)
    assert r.code == 0, r
    only_file = tmp_path / "with-bootstrap.properties"
    only_file.write_text(f"bootstrap.servers={broker.bootstrap_servers}\n")
    assert run_odradek("cluster", "--command-config", only_file).code == 0
    bad = tmp_path / "bad.properties"
    bad.write_text("request.timeout.msx=5000\n")
    r = odradek("cluster", "--command-config", bad)
    assert r.code == 1 and "request.timeout.msx" in r.err and "request.timeout.ms" in r.err
    missing = odradek("cluster", "--command-config", tmp_path / "nope.properties")
    assert missing.code == 1 and "cannot read" in missing.err
