"""The ``odradek`` command."""

from __future__ import annotations

import io
import logging
import sys

import click

# Commands living in other modules, imported only when run (or when their own --help is
# asked for), so that `odradek server` and `odradek --help` start fast. Name → (module,
# attribute, one-line help shown by `odradek --help`).
LAZY_COMMANDS = {
    "topics": ("odradek.cli.topics", "topics", "Create, list, describe, alter and delete topics."),
    "produce": ("odradek.cli.console_producer", "produce", "Send lines from stdin or a file to a topic."),
    "consume": ("odradek.cli.console_consumer", "consume", "Print records of a topic."),
    "groups": (
        "odradek.cli.groups",
        "groups",
        "List, describe, delete consumer groups; reset their offsets.",
    ),
    "share-groups": (
        "odradek.cli.share_groups",
        "share_groups",
        "List and describe share groups (KIP-932 queues).",
    ),
    "configs": ("odradek.cli.configs", "configs", "Describe and alter topic and broker configs."),
    "users": ("odradek.cli.users", "users", "Create, delete and list SCRAM users."),
    "acls": ("odradek.cli.acls", "acls", "Add, remove and list ACLs (kafka-acls)."),
    "offsets": (
        "odradek.cli.offsets",
        "offsets",
        "Earliest, latest or by-time offsets of a topic's partitions.",
    ),
    "cluster": ("odradek.cli.cluster_info", "cluster", "Cluster id, controller and brokers; `cluster up` starts one."),
    "reassign": ("odradek.cli.reassign", "reassign", "Move partitions between brokers (generate, execute, verify)."),
    "leader-election": (
        "odradek.cli.leader_election",
        "leader_election",
        "Elect preferred (or unclean) partition leaders now.",
    ),
    "log-dirs": ("odradek.cli.log_dirs_tool", "log_dirs", "The brokers' log dirs and the partitions in them."),
    "console": (
        "odradek.cli.console",
        "console",
        "The web console and lag metrics for a cluster running elsewhere.",
    ),
    "perf": ("odradek.cli.perf", "perf", "Producer and consumer performance tests."),
    "dump-log": (
        "odradek.cli.dump_log",
        "dump_log",
        "Print log segments, indexes and snapshots (kafka-dump-log).",
    ),
    "verify-log": (
        "odradek.cli.verify_log",
        "verify_log",
        "Check every record batch's CRC in log dirs, partitions or segments.",
    ),
    "pipeline": ("odradek.pipeline.cli", "pipeline", "Spark pipelines on Odradek topics."),
    "streams": ("odradek.cli.streams", "streams", "Kafka Streams apps in Python, run by Spark (describe, run, reset)."),
    "schemas": (
        "odradek.cli.schemas",
        "schemas",
        "Subjects, versions, compatibility and modes of a schema registry.",
    ),
    "connect": (
        "odradek.cli.connect",
        "connect",
        "Run a Kafka Connect worker (connect-standalone.sh).",
    ),
    "connectors": (
        "odradek.cli.connectors",
        "connectors",
        "List, create, inspect and control the connectors of a Connect worker.",
    ),
    "schema-registry": (
        "odradek.cli.registry_command",
        "schema_registry",
        "Run a schema registry (Confluent's REST API) over a cluster.",
    ),
}


class LazyGroup(click.Group):
    """A click group whose LAZY_COMMANDS are imported on first use."""

    def list_commands(self, ctx):
        names = set(super().list_commands(ctx))
        names.update(name for name, (module, _, _) in LAZY_COMMANDS.items() if _module_exists(module))
        return sorted(names)

    def get_command(self, ctx, name):
        command = super().get_command(ctx, name)
        if command is not None or name not in LAZY_COMMANDS:
            return command
        module, attr, _ = LAZY_COMMANDS[name]
        if not _module_exists(module):
            return None
        import importlib

        command = getattr(importlib.import_module(module), attr)
        self.add_command(command, name)
        return command

    def format_commands(self, ctx, formatter):
        rows = []
        for name in self.list_commands(ctx):
            if name in self.commands:
                cmd = self.commands[name]
                if cmd.hidden:
                    continue
                rows.append((name, cmd.get_short_help_str(formatter.width - 6 - len(name))))
            else:
                rows.append((name, LAZY_COMMANDS[name][2]))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _module_exists(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="odradek")
def cli():
    """Odradek: a Kafka-compatible event streaming platform in Python.

    \b
    Start a broker on 127.0.0.1:9092 with data in ./odradek-data:
      odradek server
    Then use it with these commands or any Kafka client:
      odradek topics create greetings --partitions 3
      echo hello | odradek produce greetings
      odradek consume greetings --from-beginning --max-messages 1
      kcat -b 127.0.0.1:9092 -t greetings -C -e
    Every client command takes --bootstrap-server HOST:PORT (default 127.0.0.1:9092),
    --command-config FILE and --output table|json; `odradek COMMAND --help` shows examples.
    Exit status: 0 ok, 1 error, 2 usage error, 130 interrupted (Ctrl-C).
    """


@cli.command()
@click.argument("properties", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set a broker config key, overriding the file (repeatable).",
)
@click.option("--log-level", default="INFO", show_default=True, help="DEBUG, INFO, WARNING or ERROR.")
def server(properties, overrides, log_level):
    """Run a broker.

    PROPERTIES is a Kafka server.properties file; every key Kafka's broker knows is read
    with Kafka's defaults, and an unknown or invalid key stops the start with a message
    naming it. Keys Odradek accepts without effect (thread counts, Java plugin classes,
    KRaft keys, ...) are listed in a warning at start; `odradek configs describe --broker 0
    --all` marks them. Without a file the broker listens on PLAINTEXT://127.0.0.1:9092 and
    keeps data in ./odradek-data.

    \b
    Examples:
      odradek server
      odradek server config/server.properties
      odradek server --override listeners=PLAINTEXT://0.0.0.0:9093 \\
                     --override advertised.listeners=PLAINTEXT://myhost:9093 \\
                     --override log.dirs=/var/lib/odradek
    SIGTERM or Ctrl-C shuts down cleanly (logs flushed, checkpoints written). A start
    that cannot succeed (a log dir locked by another broker, unwritable or not a
    directory; a port in use) prints one line saying what to do and exits with status 1,
    having changed no data. The soft open-file limit is raised to the hard limit; each
    partition in use holds 3 descriptors, so raise the hard limit (ulimit -n,
    LimitNOFILE=) for many partitions.

    A schema registry (Confluent's REST API, for AvroSerializer and friends) is served
    beside the broker on schema.registry.listeners (default http://127.0.0.1:8081;
    --override schema.registry.listeners= turns it off).
    """
    logging.basicConfig(
        level=getattr(logging, log_level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # kio's types register optional hypothesis strategies when hypothesis is importable;
    # a broker process has no use for them and they double its start-up time.
    sys.modules.setdefault("hypothesis", None)
    from odradek.broker.config import BrokerConfig, ConfigError
    from odradek.broker.server import StartupError, run
    from odradek.cli.registry_beside import start_beside

    pairs = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--override")
        pairs[key.strip()] = value.strip()
    try:
        config = BrokerConfig.load(properties, pairs)
        config.check_security()
    except ConfigError as exc:
        raise click.ClickException(f"invalid broker configuration: {exc}") from None
    try:
        run(config, beside=start_beside)
    except StartupError as exc:
        raise click.ClickException(f"the broker cannot start: {exc}") from None


def write_whole_lines_to_pipes() -> None:
    """Under ``python -u`` or PYTHONUNBUFFERED=1, sys.stdout writes straight to the file
    descriptor, and a write the kernel cuts short (a pipe whose slow reader left it full)
    loses the rest of the text: `odradek configs describe --all -o json | slow-reader` got
    the first 64 KiB only. A buffered writer retries until all is written; line buffering
    keeps the output as prompt as unbuffered."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if isinstance(stream, io.TextIOWrapper) and isinstance(stream.buffer, io.FileIO):
            stream.flush()
            buffered = io.BufferedWriter(stream.buffer)
            setattr(sys, name, io.TextIOWrapper(buffered, stream.encoding, stream.errors, line_buffering=True))


def main():
    write_whole_lines_to_pipes()
    # kio's types register optional hypothesis strategies when hypothesis is importable;
    # no command has a use for them, and they double the start-up time.
    sys.modules.setdefault("hypothesis", None)
    cli(prog_name="odradek")


if __name__ == "__main__":
    main()
