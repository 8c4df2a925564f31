"""What every client-side ``odradek`` command shares: connection options, output, errors.

* ``@client_command`` adds ``--bootstrap-server`` (``-b``, env ``ODRADEK_BOOTSTRAP_SERVER``),
  ``--command-config FILE`` (client properties, Kafka's dotted names) and ``--output
  table|json`` (``-o``), and hands the command a ``Session`` in place of those three.
* ``Session`` opens clients (``admin()``, ``producer()``, ``consumer()``) after a quick
  TCP probe of the bootstrap addresses, so an unreachable broker is reported at once and by
  address instead of after a client timeout.
* Errors: any Kafka or client error escaping a command becomes ``CliError`` — a sentence
  naming the problem and one naming the fix — and exit status 1. Usage errors exit with 2
  (click's rule); Ctrl-C with 130.

Heavy modules (the client, rich) are imported on first use, so ``odradek server`` and
``--help`` stay fast.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import socket
import sys
from typing import Any

import click

from odradek.properties import PropertiesError, load_properties

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class CliError(click.ClickException):
    """A failure the user can act on: ``message`` names the problem, ``hint`` the fix."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint

    def show(self, file=None) -> None:
        file = file or sys.stderr
        click.echo(click.style("Error: ", fg="red", bold=True) + self.message, file=file)
        if self.hint:
            click.echo(click.style("Hint: ", fg="yellow") + self.hint, file=file)


# -- parsing helpers -----------------------------------------------------------------------


def parse_key_values(items, what: str = "--config") -> dict[str, str]:
    """``("a=1", "b=2,c=3")`` → ``{"a": "1", "b": "2", "c": "3"}``.

    Commas separate pairs, except inside ``[...]`` (Kafka's syntax for list values:
    ``--add-config 'cleanup.policy=[compact,delete]'``).
    """
    out: dict[str, str] = {}
    for item in items or ():
        for pair in _split_outside_brackets(item):
            if not pair.strip():
                continue
            key, sep, value = pair.partition("=")
            if not sep or not key.strip():
                raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint=what)
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            out[key.strip()] = value
    return out


def _split_outside_brackets(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(depth - 1, 0)
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def parse_int_list(text: str, what: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise click.BadParameter(
            f"expected comma-separated integers, got {text!r}", param_hint=what
        ) from None


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file (Kafka's format; values trimmed, as Kafka's clients trim them)."""
    try:
        return {key: value.strip() for key, value in load_properties(path).items()}
    except OSError as exc:
        raise CliError(
            f"cannot read {path}: {exc.strerror}", "pass a readable client properties file"
        ) from None
    except PropertiesError as exc:
        raise CliError(str(exc), "write a \\u escape as four hex digits, e.g. \\u00e9") from None


def topic_arguments(help_text: str = "Topic (or give it as an argument)."):
    """A command's topic, positional or ``--topic``/``-t`` (read it with ``one_name``)."""

    def decorate(fn):
        fn = click.option("--topic", "-t", "topic_opt", metavar="TOPIC", help=help_text)(fn)
        return click.argument("topic", required=False)(fn)

    return decorate


def one_name(positional, option, what: str, required: bool = True) -> str | None:
    """The name given positionally or through ``--topic``/``--group``, not both differently."""
    if positional and option and positional != option:
        raise click.UsageError(f"{what} given twice: {positional!r} and --{what} {option!r}")
    name = positional or option
    if required and not name:
        raise click.UsageError(f"Missing {what} name: give it as an argument or with --{what}.")
    return name


# -- the session -----------------------------------------------------------------------------


def _canonical(name: str) -> str:
    return name.strip().replace(".", "_").replace("-", "_").lower()


class Session:
    """Connection settings and output mode of one command run."""

    def __init__(self, bootstrap: str, command_config: str | None, output: str):
        self.bootstrap = bootstrap
        self.output = output
        self.properties = read_properties(command_config) if command_config else {}
        self.command_config = command_config
        if "bootstrap.servers" in self.properties and bootstrap == DEFAULT_BOOTSTRAP:
            self.bootstrap = self.properties["bootstrap.servers"]
        self.properties.pop("bootstrap.servers", None)
        self._probed = False
        self._console = None
        self._err_console = None

    @property
    def json(self) -> bool:
        return self.output == "json"

    # -- output --

    @property
    def console(self):
        if self._console is None:
            from rich.console import Console

            probe = Console()
            # Off a terminal (pipes, files, tests) rich would wrap at 80 columns: let
            # tables be as wide as their content instead.
            width = None if probe.is_terminal else 4096
            self._console = Console(highlight=False, soft_wrap=False, width=width)
        return self._console

    @property
    def err_console(self):
        if self._err_console is None:
            from rich.console import Console

            self._err_console = Console(stderr=True, highlight=False)
        return self._err_console

    def print_json(self, data: Any) -> None:
        click.echo(json.dumps(data, indent=2, default=_json_default))

    def table(self, columns: list[str], rows: list[list[Any]], title: str | None = None) -> None:
        """A rich table on stdout (plain, no box lines, so it greps and pastes well)."""
        from rich.table import Table

        t = Table(title=title, box=None, pad_edge=False, padding=(0, 3, 0, 0), header_style="bold")
        for col in columns:
            justify = "right" if col.isupper() and col in _NUMERIC_COLUMNS else "left"
            t.add_column(col, justify=justify, no_wrap=True, overflow="fold")
        for row in rows:
            t.add_row(*("-" if v is None else str(v) for v in row))
        with self.console.capture() as capture:
            self.console.print(t)
        text = "\n".join(line.rstrip() for line in capture.get().splitlines())
        click.echo(text, color=self.console.is_terminal or None)

    def info(self, text: str) -> None:
        """A human message on stderr (kept off stdout so pipes carry data only)."""
        click.echo(text, err=True)

    # -- clients --

    def probe(self) -> None:
        """Fail fast, by address, when no bootstrap server accepts a TCP connection."""
        if self._probed:
            return
        addresses = parse_bootstrap(self.bootstrap)
        problems = []
        for host, port in addresses:
            try:
                with socket.create_connection((host, port), timeout=3):
                    self._probed = True
                    return
            except socket.gaierror as exc:
                problems.append(f"{host}:{port} ({exc.strerror or 'unknown host'})")
            except OSError as exc:
                reason = "connection refused" if isinstance(exc, ConnectionRefusedError) else str(exc)
                problems.append(f"{host}:{port} ({reason or 'timed out'})")
        raise CliError(
            f"cannot reach a broker at {', '.join(problems)}",
            "start one with `odradek server` (it listens on 127.0.0.1:9092), or point "
            "--bootstrap-server (or ODRADEK_BOOTSTRAP_SERVER) at a running broker",
        )

    def client_config(self, kind: str, extra: dict | None = None) -> dict:
        """``--command-config`` properties that ``kind`` knows, plus ``extra``.

        Keys another kind of client knows are skipped (one properties file serves every
        tool, as in Kafka); keys no client knows are an error naming the key.
        """
        from odradek.client import client_config as cfg

        specs = {"producer": {**cfg.COMMON, **cfg.PRODUCER}, "consumer": {**cfg.COMMON, **cfg.CONSUMER}}
        specs["admin"] = {**cfg.COMMON, **cfg.ADMIN}
        known_anywhere = set().union(*specs.values())
        out: dict = {}
        for key, value in self.properties.items():
            name = _canonical(key)
            if name in specs[kind]:
                out[name] = value
            elif name not in known_anywhere:
                import difflib

                close = difflib.get_close_matches(
                    name.replace("_", "."), [k.replace("_", ".") for k in known_anywhere], 1
                )
                raise CliError(
                    f"{self.command_config}: unknown client property {key!r}"
                    + (f" (did you mean {close[0]!r}?)" if close else ""),
                    "remove it or fix its name; properties use Kafka's names, e.g. request.timeout.ms",
                )
        for key, value in (extra or {}).items():
            out[_canonical(key)] = value
        out.setdefault("client_id", f"odradek-cli-{kind}")
        out["bootstrap_servers"] = self.bootstrap
        return out

    def admin(self, **options):
        self.probe()
        from odradek.client.blocking import Admin

        return Admin(self.client_config("admin", options))

    def producer(self, **options):
        self.probe()
        from odradek.client.blocking import Producer

        return Producer(self.client_config("producer", options))

    def consumer(self, **options):
        self.probe()
        from odradek.client.blocking import Consumer

        return Consumer(self.client_config("consumer", options))

    def principal(self) -> str:
        """The principal a SASL listener sees for this session (``User:NAME``), else Kafka's
        ``User:ANONYMOUS``."""
        props = {_canonical(k): v for k, v in self.properties.items()}
        user = props.get("sasl_username") or props.get("sasl_plain_username")
        if props.get("sasl_jaas_config"):
            from odradek.protocol.jaas_config import JaasError, client_credentials

            with contextlib.suppress(JaasError):
                user = client_credentials(props["sasl_jaas_config"])[0]
        if not props.get("security_protocol", "").upper().startswith("SASL") or not user:
            return "User:ANONYMOUS"
        return f"User:{user}"

    @contextlib.contextmanager
    def explained_denials(self, topic_operation: str, topic: str, group: str | None = None):
        """Turn a topic's (or the group's) authorization failure into ``not_authorized``."""
        from odradek.protocol.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

        try:
            yield
        except TopicAuthorizationFailedError as exc:
            raise self.not_authorized(exc, topic_operation, "topic", topic) from None
        except GroupAuthorizationFailedError as exc:
            if group is None:
                raise
            raise self.not_authorized(exc, "Read", "group", group) from None

    def not_authorized(self, exc, operation: str, resource: str, name: str) -> CliError:
        """The denial of ``operation`` on a topic or group, with the ``odradek acls`` line that
        grants it."""
        principal = self.principal()
        code = exc.code.name.upper()
        hint = (
            f"an admin (a super user) can grant it: odradek acls add --allow-principal {principal} "
            f"--operation {operation} --{resource} {name}"
        )
        if operation == "Write":
            hint += " (and --operation Create too, if the topic is to be created on first use)"
        return CliError(f"{principal} is not authorized to {operation} {resource} {name!r} ({code})", hint)


_NUMERIC_COLUMNS = {
    "PARTITION",
    "PARTITIONS",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LOG-START-OFFSET",
    "LAG",
    "NEW-OFFSET",
    "OFFSET",
    "REPLICATION-FACTOR",
    "LEADER",
    "ID",
    "PORT",
    "MEMBERS",
    "TIMESTAMP",
}


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    from odradek.client.client_config import parse_bootstrap as parse
    from odradek.client.client_errors import ConfigError

    try:
        return parse(text, "address")
    except ConfigError as exc:
        raise click.BadParameter(
            f"{exc}; expected HOST:PORT[,HOST:PORT...]", param_hint="--bootstrap-server"
        ) from None


def _json_default(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, set | frozenset):
        return sorted(value)
    return str(value)


# -- errors ----------------------------------------------------------------------------------

# Kafka error code name → hint (the fix); the message itself comes from the error.
_HINTS = {
    "topic_already_exists": "choose another name, or add --if-not-exists to accept the existing topic",
    "unknown_topic_or_partition": "check the name with `odradek topics list`",
    "unknown_topic_id": "check the name with `odradek topics list`",
    "invalid_partitions": "give a partition count of 1 or more (and more than the topic has, when altering)",
    "invalid_replication_factor": "a single broker holds one replica: use --replication-factor 1 "
    "(see the brokers with `odradek cluster`)",
    "invalid_replica_assignment": "use broker ids that `odradek cluster` lists, one list per partition",
    "invalid_config": "see the valid keys and their values with `odradek configs describe --topic TOPIC --all`",
    "invalid_topic_exception": "topic names use only letters, digits, '.', '_' and '-' (at most 249)",
    "group_id_not_found": "list the groups with `odradek groups list`",
    "non_empty_group": "stop the group's consumers first (see them with `odradek groups describe GROUP --members`)",
    "group_not_empty": "stop the group's consumers first",
    "unknown_member_id": "stop the group's consumers first; offsets of an active group cannot be changed",
    "coordinator_not_available": "the broker is still loading; try again in a moment",
    "policy_violation": "the broker's policy refused it; see the broker log",
    "cluster_authorization_failed": "the broker refused the operation for this client",
    "unsupported_version": "the broker does not support this operation",
    "message_too_large": "send smaller records, or raise max.message.bytes on the topic",
    "record_list_too_large": "send smaller records, or raise max.message.bytes on the topic",
    "offset_out_of_range": "choose an offset between the earliest and latest (see `odradek offsets TOPIC`)",
    "topic_authorization_failed": "an admin (a super user) can grant it with `odradek acls add`; "
    "see the ACLs with `odradek acls list --topic TOPIC`",
    "group_authorization_failed": "an admin (a super user) can grant Read on the group with "
    "`odradek acls add --allow-principal User:NAME --operation Read --group GROUP`",
    "sasl_authentication_failed": "check sasl.username and sasl.password (or sasl.jaas.config) in the "
    "--command-config file; `odradek users list`, run as an admin, shows the SCRAM users",
    "unsupported_sasl_mechanism": "set sasl.mechanism in the --command-config file to one the listener enables",
    "illegal_sasl_state": "set security.protocol in the --command-config file to the listener's protocol",
}

_SECURITY_HINT = (
    "put the listener's security settings in a client properties file and pass it with "
    "--command-config FILE (e.g. security.protocol=SASL_PLAINTEXT, sasl.mechanism=SCRAM-SHA-256, "
    "sasl.username=..., sasl.password=...; see docs/security.md)"
)


# A record the producer refuses before sending names the producer's own limit it passed
# (with the Python option name); the fix is then on the producer, not the topic.
_CLIENT_LIMITS = {"max_request_size": "max.request.size", "buffer_memory": "buffer.memory"}


def _client_limit(text: str) -> tuple[str, str | None]:
    """``text`` with Kafka's property name for a producer limit it names, and the hint."""
    for option, prop in _CLIENT_LIMITS.items():
        if f"larger than {option}" in text:
            hint = (
                f"send smaller records, or raise the producer's {prop} (a producer property, e.g. "
                f"--producer-property {prop}=BYTES); the broker's own limit is the topic's max.message.bytes"
            )
            return text.replace(f"larger than {option}", f"larger than the producer's {prop}"), hint
    return text, None


def translate(exc: BaseException, session: Session | None = None) -> CliError | None:
    """A CliError for a client or Kafka error, or None for anything else."""
    from odradek.protocol.errors import KafkaError

    if isinstance(exc, CliError):
        return exc
    if isinstance(exc, KafkaError):
        name = exc.code.name
        text = str(getattr(exc, "message", "") or exc)
        text, limit_hint = _client_limit(text)
        if text.endswith(name):  # "group 'x': group_id_not_found" → "group 'x': group id not found"
            text = text[: -len(name)] + name.replace("_", " ")
        text = re.sub(
            r"(?:config resource )?ConfigResource\(resource_type='(\w+)', name='([^']*)'\)", r"\1 '\2'", text
        )
        return CliError(f"{text} ({name.upper()})", limit_hint or _HINTS.get(name))
    from odradek.client import client_errors as cerr

    where = session.bootstrap if session is not None else "the broker"
    if isinstance(exc, cerr.ConfigError):
        return CliError(f"invalid client option: {exc}", "fix it in --command-config or on the command line")
    if isinstance(exc, cerr.SecurityMismatchError):
        return CliError(str(exc), _SECURITY_HINT)
    if isinstance(exc, cerr.KafkaTimeoutError):
        return CliError(
            f"timed out talking to {where}: {exc}",
            "check that the broker is up (`odradek cluster`) and that --bootstrap-server is right",
        )
    if isinstance(exc, cerr.KafkaConnectionError | ConnectionError):
        return CliError(f"lost the connection to {where}: {exc}", "check that the broker is still running")
    if isinstance(exc, cerr.ClientError):
        return CliError(str(exc))
    return None


def handle_errors(session_getter=lambda: None):
    """Turn client and Kafka errors into ``CliError`` (exit 1); Ctrl-C into exit 130."""

    @contextlib.contextmanager
    def manager():
        try:
            yield
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except BrokenPipeError:
            # `odradek consume ... | head`: the reader went away; that is not an error.
            with contextlib.suppress(Exception):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            sys.exit(EXIT_OK)
        except Exception as exc:
            err = translate(exc, session_getter())
            if err is None:
                raise
            raise err from None

    return manager()


command_config_option = click.option(
    "--command-config",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Client properties file (Kafka's names, e.g. request.timeout.ms=5000).",
)
bootstrap_server_option = click.option(
    "--bootstrap-server",
    "-b",
    envvar="ODRADEK_BOOTSTRAP_SERVER",
    default=DEFAULT_BOOTSTRAP,
    show_default=True,
    metavar="HOST:PORT",
    help="Broker(s) to connect to, comma-separated. Env: ODRADEK_BOOTSTRAP_SERVER.",
)


def client_command(fn):
    """Add the connection and output options; call ``fn(session, **rest)`` with errors handled."""

    @click.option(
        "--output",
        "-o",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help="Human tables, or JSON for scripts.",
    )
    @command_config_option
    @bootstrap_server_option
    @functools.wraps(fn)
    def wrapper(bootstrap_server, command_config, output, **kwargs):
        holder: list[Session] = []
        with handle_errors(lambda: holder[0] if holder else None):
            session = Session(bootstrap_server, command_config, output)
            holder.append(session)
            return fn(session, **kwargs)

    return wrapper


def millis_to_iso(ms: int | None) -> str | None:
    if ms is None or ms < 0:
        return None
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")


def parse_time(text: str, what: str) -> int:
    """Milliseconds since the epoch from ``1700000000000``, an ISO date-time
    (``2024-05-01T12:00:00``, ``2024-05-01T12:00:00.000+02:00``, ``...Z``; no zone = local),
    or a date (``2024-05-01``)."""
    import datetime as dt

    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not a time; use epoch milliseconds or an ISO date-time like 2024-05-01T12:00:00",
            param_hint=what,
        ) from None
    if value.tzinfo is None:
        value = value.astimezone()
    return int(value.timestamp() * 1000)
