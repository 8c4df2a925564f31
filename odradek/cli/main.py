"""The ``odradek`` command."""

from __future__ import annotations

import logging
import sys

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="odradek")
def cli():
    """Odradek: a Kafka-compatible event streaming platform in Python.

    \b
    Start a broker on 127.0.0.1:9092 with data in ./odradek-data:
      odradek server
    Then use any Kafka client, for example:
      kcat -b 127.0.0.1:9092 -t greetings -P <<< 'hello'
      kcat -b 127.0.0.1:9092 -t greetings -C -e
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
    naming it. Without a file the broker listens on PLAINTEXT://127.0.0.1:9092 and keeps
    data in ./odradek-data.

    \b
    Examples:
      odradek server
      odradek server config/server.properties
      odradek server --override listeners=PLAINTEXT://0.0.0.0:9093 \\
                     --override advertised.listeners=PLAINTEXT://myhost:9093 \\
                     --override log.dirs=/var/lib/odradek
    SIGTERM or Ctrl-C shuts down cleanly (logs flushed, checkpoints written).
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
    from odradek.broker.server import run

    pairs = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--override")
        pairs[key.strip()] = value.strip()
    try:
        config = BrokerConfig.load(properties, pairs)
    except ConfigError as exc:
        raise click.ClickException(f"invalid broker configuration: {exc}") from None
    run(config)


from odradek.cli.dump_log import dump_log  # noqa: E402

cli.add_command(dump_log)


def main():
    cli(prog_name="odradek")


if __name__ == "__main__":
    main()
