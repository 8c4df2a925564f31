"""``odradek streams``: describe and run Kafka Streams apps written with ``odradek.streams``.

    odradek streams describe wordcount.py            # the topology, as Kafka's describe() prints it
    odradek streams run wordcount.py -b 127.0.0.1:9092 --config commit.interval.ms=1000
    odradek streams reset --application-id wordcount --input-topics lines   # offsets, internal topics

An app file defines ``topology`` (a ``Topology``, a ``StreamsBuilder``, or a function returning
either) and may define ``config`` (a dict of Streams config keys); ``--config KEY=VALUE`` and the
options below override it.
"""

from __future__ import annotations

import importlib
import importlib.util
import runpy
import sys
from pathlib import Path

import click

from odradek.pipeline.cli import EXIT_INTERRUPTED, bootstrap_option, java_problem
from odradek.pipeline.cli import _session as spark_session_for_run

# Subcommands living in their own modules: name -> (module, attribute).
_OTHER_COMMANDS = {"reset": ("odradek.cli.streams_reset", "reset")}


class _StreamsGroup(click.Group):
    """``describe`` and ``run`` here, ``reset`` from odradek/cli/streams_reset.py."""

    def list_commands(self, ctx):
        found = [
            name for name, (module, _attr) in _OTHER_COMMANDS.items() if importlib.util.find_spec(module)
        ]
        return sorted(set(super().list_commands(ctx)) | set(found))

    def get_command(self, ctx, name):
        if name in _OTHER_COMMANDS and importlib.util.find_spec(_OTHER_COMMANDS[name][0]):
            module, attr = _OTHER_COMMANDS[name]
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)


@click.group(
    cls=_StreamsGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
def streams():
    """Kafka Streams apps in Python (odradek.streams), run by Spark.

    An APP file is Python that builds a topology with StreamsBuilder and names it `topology`
    (and optionally a `config` dict of Streams keys). See docs/streams.md.

    \b
    Examples:
      odradek streams describe wordcount.py
      odradek streams run wordcount.py -b 127.0.0.1:9092 --application-id wordcount
      odradek streams reset --application-id wordcount --input-topics lines -b 127.0.0.1:9092
    """


def load_app(path: str) -> tuple:
    """``(topology, config)`` from an app file."""
    from odradek.streams import StreamsBuilder, Topology

    file = Path(path)
    if not file.is_file():
        raise click.ClickException(f"{path}: no such file")
    try:
        namespace = runpy.run_path(str(file), run_name="__odradek_streams_app__")
    except Exception as exc:
        raise click.ClickException(f"{path} failed to load: {type(exc).__name__}: {exc}") from None
    topology = namespace.get("topology")
    if callable(topology) and not isinstance(topology, (Topology, StreamsBuilder)):
        topology = topology()
    if isinstance(topology, StreamsBuilder):
        topology = topology.build()
    if not isinstance(topology, Topology):
        raise click.ClickException(
            f"{path} defines no `topology`: end it with `topology = builder.build()` "
            "(or a function returning a Topology)"
        )
    return topology, dict(namespace.get("config") or {})


@streams.command()
@click.argument("app", type=click.Path(dir_okay=False))
def describe(app):
    """Print APP's topology: sources, processors, stores and sinks, by sub-topology.

    \b
    Examples:
      odradek streams describe wordcount.py
    """
    topology, _config = load_app(app)
    click.echo(str(topology.describe()), nl=False)


@streams.command()
@click.argument("app", type=click.Path(dir_okay=False))
@bootstrap_option
@click.option("--application-id", help="application.id (the app's config, else the file's name).")
@click.option(
    "--config",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="A Streams config key (commit.interval.ms, processing.guarantee, state.dir, spark.*, …); repeatable.",
)
@click.option("--master", help="spark.master (default local[num.stream.threads]).")
@click.option(
    "--log-level", default="WARN", show_default=True, help="Spark's log level (its log goes to a file)."
)
def run(app, bootstrap_servers, application_id, settings, master, log_level):
    """Run APP until Ctrl-C (or SIGTERM), which stops it after the micro-batch in progress.

    \b
    Examples:
      odradek streams run wordcount.py -b 127.0.0.1:9092 --application-id wordcount
      odradek streams run app.py --config processing.guarantee=exactly_once_v2 --master local[2]
    """
    from odradek.pipeline.supervise import supervise
    from odradek.streams import ConfigException, KafkaStreams, MissingSourceTopicException, StreamsConfig

    topology, config = load_app(app)
    for item in settings:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--config")
        config[key.strip()] = value.strip()
    config.setdefault("bootstrap.servers", bootstrap_servers)
    if application_id:
        config["application.id"] = application_id
    config.setdefault("application.id", Path(app).stem)
    if master:
        config["spark.master"] = master
    try:
        streams_config = StreamsConfig(config)
    except ConfigException as exc:
        raise click.ClickException(str(exc)) from None
    problem = java_problem()
    if problem:
        raise click.ClickException(problem)
    name = streams_config.application_id
    master = streams_config.spark.get("spark.master") or f"local[{streams_config.num_stream_threads}]"
    spark_conf = {k: v for k, v in streams_config.spark.items() if k != "spark.master"}
    spark_conf.setdefault("spark.sql.shuffle.partitions", str(max(2, streams_config.num_stream_threads)))
    # The pipelines' session: Spark's log to a file, the JVM in its own process group (Ctrl-C
    # reaches this process only, which stops the queries after their micro-batch).
    spark, own, log_path = spark_session_for_run(master, spark_conf, log_level, f"streams-{name}")
    app_streams = KafkaStreams(topology, streams_config, spark=spark)
    try:
        app_streams.start()
    except MissingSourceTopicException as exc:
        if own:
            spark.stop()
        raise click.ClickException(str(exc)) from None
    click.echo(f"{name}: started; runs until Ctrl-C; Spark logs to {log_path}", err=True)
    try:
        summary = supervise(spark, name, app_streams.queries())
    finally:
        app_streams.close()
        if own:
            spark.sparkContext.setLogLevel("ERROR")  # a stopping session logs warnings
            spark.stop()
    if summary.errors:
        raise click.ClickException(
            f"{name} failed: query {'; query '.join(summary.errors)} (details in {log_path})"
        )
    click.echo(summary.text())
    if summary.interrupted:
        sys.exit(EXIT_INTERRUPTED)
