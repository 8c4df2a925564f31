"""``odradek connectors``: the Kafka Connect REST API from the command line."""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import click

DEFAULT_URL = "http://127.0.0.1:8083"
url_option = click.option(
    "--url", default=DEFAULT_URL, show_default=True, envvar="ODRADEK_CONNECT_URL",
    help="The Connect worker's REST API (or $ODRADEK_CONNECT_URL).",
)


def _call(url: str, method: str, path: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        url.rstrip("/") + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            text = resp.read().decode()
    except urllib.error.HTTPError as exc:
        text = exc.read().decode(errors="replace")
        try:
            message = json.loads(text).get("message", text)
        except ValueError:
            message = text
        raise click.ClickException(f"{exc.code}: {message}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise click.ClickException(f"cannot reach the Connect worker at {url}: {exc}") from None
    return json.loads(text) if text.strip() else None


def _print(value: Any) -> None:
    if value is not None:
        click.echo(json.dumps(value, indent=2))


def _config_from(source: str) -> dict[str, str]:
    """A connector config from a .properties file, a .json file, or inline JSON."""
    from odradek.properties import PropertiesError, load_properties

    if source.lstrip().startswith("{"):
        data = json.loads(source)
    elif source.endswith(".json"):
        data = json.loads(Path(source).read_text())
    else:
        try:
            return load_properties(source)
        except (PropertiesError, OSError) as exc:
            raise click.ClickException(str(exc)) from None
    return data.get("config", data) if isinstance(data, dict) else {}


@click.group("connectors")
def connectors():
    """List, create, inspect and control the connectors of a Kafka Connect worker.

    \b
    Examples:
      odradek connectors create config/connect-file-source.properties
      odradek connectors status local-file-source
      odradek connectors restart local-file-source --include-tasks --only-failed
    """


@connectors.command("list")
@url_option
@click.option("--status", "with_status", is_flag=True, help="Show each connector's state and its tasks' states.")
def list_connectors(url, with_status):
    """The connectors' names (with --status, their states).

    \b
    Examples:
      odradek connectors list --status --url http://127.0.0.1:8083
    """
    if not with_status:
        for name in _call(url, "GET", "/connectors"):
            click.echo(name)
        return
    for name, entry in sorted(_call(url, "GET", "/connectors?expand=status").items()):
        status = entry["status"]
        tasks = " ".join(f"{t['id']}:{t['state']}" for t in status["tasks"])
        click.echo(f"{name}\t{status['type']}\t{status['connector']['state']}\t{tasks}")


@connectors.command("create")
@url_option
@click.argument("config")
@click.option("--name", help="The connector's name (default: the config's name key).")
@click.option("--initial-state", type=click.Choice(["RUNNING", "PAUSED", "STOPPED"]), default=None)
def create(url, config, name, initial_state):
    """Create a connector from CONFIG: a .properties file (Kafka's), a .json file or inline JSON.

    \b
    Examples:
      odradek connectors create connect-file-source.properties
      odradek connectors create '{"name": "s", "connector.class": "FileStreamSource", "topic": "t"}'
    """
    props = _config_from(config)
    name = name or props.get("name")
    if not name:
        raise click.UsageError("the config has no name key; give --name")
    body: dict[str, Any] = {"name": name, "config": props}
    if initial_state:
        body["initial_state"] = initial_state
    _print(_call(url, "POST", "/connectors", body))


@connectors.command("config")
@url_option
@click.argument("name")
@click.option("--set", "new_config", metavar="CONFIG", help="Replace the config (file or inline JSON).")
def config(url, name, new_config):
    """Show a connector's config, or replace it with --set.

    \b
    Examples:
      odradek connectors config local-file-source
      odradek connectors config local-file-source --set connect-file-source.properties
    """
    if new_config:
        _print(_call(url, "PUT", f"/connectors/{name}/config", _config_from(new_config)))
    else:
        _print(_call(url, "GET", f"/connectors/{name}/config"))


@connectors.command("status")
@url_option
@click.argument("name")
def status(url, name):
    """A connector's state and its tasks' (with the trace of a FAILED one).

    \b
    Examples:
      odradek connectors status local-file-source
    """
    _print(_call(url, "GET", f"/connectors/{name}/status"))


@connectors.command("restart")
@url_option
@click.argument("name")
@click.option("--task", type=int, help="Restart only this task.")
@click.option("--include-tasks", is_flag=True, help="Restart the tasks too (KIP-745).")
@click.option("--only-failed", is_flag=True, help="Only what is FAILED.")
def restart(url, name, task, include_tasks, only_failed):
    """Restart a connector (and its tasks), or one task.

    \b
    Examples:
      odradek connectors restart local-file-source --include-tasks --only-failed
      odradek connectors restart local-file-source --task 0
    """
    if task is not None:
        _call(url, "POST", f"/connectors/{name}/tasks/{task}/restart")
        return
    query = f"?includeTasks={str(include_tasks).lower()}&onlyFailed={str(only_failed).lower()}"
    _print(_call(url, "POST", f"/connectors/{name}/restart{query}"))


def _target(verb: str, doc: str):
    @url_option
    @click.argument("name")
    def command(url, name):
        _call(url, "PUT", f"/connectors/{name}/{verb}")

    command.__doc__ = f"{doc}\n\n\b\nExamples:\n  odradek connectors {verb} local-file-source\n"
    return connectors.command(verb)(command)


_target("pause", "Pause a connector and its tasks.")
_target("resume", "Resume a paused or stopped connector.")
_target("stop", "Stop a connector and shut its tasks down (its offsets can then be changed).")


@connectors.command("delete")
@url_option
@click.argument("name")
def delete(url, name):
    """Delete a connector (its offsets stay).

    \b
    Examples:
      odradek connectors delete local-file-source
    """
    _call(url, "DELETE", f"/connectors/{name}")


@connectors.command("offsets")
@url_option
@click.argument("name")
@click.option("--set", "new_offsets", metavar="JSON", help='Alter: {"offsets": [...]} as KIP-875 (connector STOPPED).')
@click.option("--reset", is_flag=True, help="Delete the connector's offsets (connector STOPPED).")
def offsets(url, name, new_offsets, reset):
    """Show, alter (--set) or reset (--reset) a connector's offsets (KIP-875).

    \b
    Examples:
      odradek connectors offsets local-file-source
      odradek connectors offsets local-file-source --reset
    """
    if reset:
        _print(_call(url, "DELETE", f"/connectors/{name}/offsets"))
    elif new_offsets:
        try:
            body = json.loads(Path(new_offsets).read_text() if Path(new_offsets).is_file() else new_offsets)
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--set") from None
        _print(_call(url, "PATCH", f"/connectors/{name}/offsets", body))
    else:
        _print(_call(url, "GET", f"/connectors/{name}/offsets"))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(connectors())
