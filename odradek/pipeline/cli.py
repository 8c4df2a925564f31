"""``odradek pipeline``: run the Spark pipelines and feed them.

    odradek pipeline generate page-views --rate 200
    odradek pipeline run page-views --checkpoint ./ckpt
    odradek pipeline run offline-load --topic page-views --output ./warehouse/page-views
    odradek pipeline run value-length --input my-input-topic --output my-output-topic

Pipelines run on a local Spark (``local[*]``) unless ``--master`` names a cluster; they
need PySpark (``pip install odradek[spark]``). Streaming pipelines run until Ctrl-C;
``--available-now`` processes what is in the topics now and stops.
"""

from __future__ import annotations

import functools
import importlib
import logging
import sys
import time

import click

from odradek.pipeline.pipelines import PIPELINES

log = logging.getLogger(__name__)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def pipeline():
    """Spark pipelines over Odradek topics (PySpark data source "odradek")."""


# -- generate ------------------------------------------------------------------------------


@pipeline.group()
def generate():
    """Publish synthetic events for the pipelines."""


@generate.command("page-views")
@click.option("-b", "--bootstrap-servers", default="127.0.0.1:9092", show_default=True)
@click.option("-t", "--topic", default="page-views", show_default=True)
@click.option(
    "--rate", type=float, default=100.0, show_default=True, help="Events per second (0: as fast as possible)."
)
@click.option(
    "--count", type=int, default=None, help="Stop after this many events (default: run until Ctrl-C)."
)
@click.option(
    "--pages", type=int, default=50, show_default=True, help="Distinct pages (Zipf-like popularity)."
)
@click.option("--users", type=int, default=1000, show_default=True)
@click.option("--seed", type=int, default=None, help="Seed for reproducible events.")
@click.option(
    "--partitions", type=int, default=3, show_default=True, help="Partitions if the topic is created."
)
@click.option(
    "--start-ms", type=int, default=None, help="Event time of the first event (default: now, per event)."
)
@click.option(
    "--step-ms",
    type=int,
    default=0,
    show_default=True,
    help="Event-time step between events with --start-ms.",
)
def generate_page_views(
    bootstrap_servers, topic, rate, count, pages, users, seed, partitions, start_ms, step_ms
):
    """JSON page-view events, keyed by user, to TOPIC (created if missing)."""
    from odradek.pipeline.pipelines.page_views import generate as run_generate

    ensure_topics(bootstrap_servers, {topic: partitions})
    started = time.monotonic()

    last = [started]

    def progress(sent: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 5:
            last[0] = now
            click.echo(f"{sent} events sent", err=True)

    try:
        sent = run_generate(
            bootstrap_servers,
            topic,
            rate=rate,
            count=count,
            seed=seed,
            pages=pages,
            users=users,
            start_ms=start_ms,
            step_ms=step_ms,
            on_progress=progress,
        )
    except KeyboardInterrupt:
        click.echo("stopped", err=True)
        return
    click.echo(f"sent {sent} page-view events to {topic} in {time.monotonic() - started:.1f}s")


def ensure_topics(bootstrap_servers: str, topics: dict[str, int], configs: dict | None = None) -> None:
    """Create the topics that do not exist yet (with this many partitions)."""
    from odradek.pipeline.wire import Cluster

    with Cluster(bootstrap_servers) as cluster:
        existing = cluster.topic_partitions(list(topics), refresh=True)
        for name, partitions in topics.items():
            if name not in existing:
                cluster.create_topic(name, partitions, configs=(configs or {}).get(name))


# -- run -----------------------------------------------------------------------------------


@pipeline.group()
def run():
    """Run a pipeline (NAME: page-views, offline-load, value-length)."""


def run_options(fn):
    @click.option("-b", "--bootstrap-servers", default="127.0.0.1:9092", show_default=True)
    @click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
    @click.option(
        "--checkpoint", default="odradek-checkpoints", show_default=True, help="Checkpoint directory."
    )
    @click.option(
        "--trigger", default="5 seconds", show_default=True, help="Processing-time trigger interval."
    )
    @click.option("--available-now", is_flag=True, help="Process what is in the topics now, then stop.")
    @click.option(
        "--starting-offsets",
        default="earliest",
        show_default=True,
        help="Where a new query starts: earliest/latest/JSON.",
    )
    @click.option(
        "--conf", "confs", multiple=True, metavar="KEY=VALUE", help="A Spark configuration (repeatable)."
    )
    @click.option("--log-level", default="WARN", show_default=True, help="Spark's log level.")
    @functools.wraps(fn)
    def wrapper(
        bootstrap_servers,
        master,
        checkpoint,
        trigger,
        available_now,
        starting_offsets,
        confs,
        log_level,
        **kw,
    ):
        from odradek.pipeline.pipelines.common import RunConfig

        config = RunConfig(
            bootstrap_servers=bootstrap_servers,
            checkpoint=checkpoint,
            trigger=trigger,
            available_now=available_now,
            starting_offsets=starting_offsets,
        )
        spark_conf = {}
        for item in confs:
            key, sep, value = item.partition("=")
            if not sep:
                raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--conf")
            spark_conf[key.strip()] = value.strip()
        return fn(config=config, master=master, spark_conf=spark_conf, log_level=log_level, **kw)

    return wrapper


def _session(master: str, spark_conf: dict, log_level: str, name: str):
    """A session for the run, and whether this command made it (and so must stop it)."""
    try:
        from pyspark.sql import SparkSession

        from odradek.pipeline import register, spark_session
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise click.ClickException(f"pipelines need PySpark: pip install 'odradek[spark]' ({exc})") from None
    active = SparkSession.getActiveSession()
    if active is not None:  # called from a program that already has one (tests, notebooks)
        register(active)
        return active, False
    spark = spark_session(master, app_name=f"odradek-{name}", config=spark_conf)
    spark.sparkContext.setLogLevel(log_level.upper())
    return spark, True


def _run(name: str, master: str, spark_conf: dict, log_level: str, config, **kwargs) -> None:
    spark, own = _session(master, spark_conf, log_level, name)
    module = importlib.import_module(PIPELINES[name])
    queries = module.start(spark, config, **kwargs)
    click.echo(
        f"{name}: {len(queries)} streaming quer{'y' if len(queries) == 1 else 'ies'} started", err=True
    )
    try:
        if config.available_now:
            for q in queries:
                q.awaitTermination()
        else:
            spark.streams.awaitAnyTermination()
    except KeyboardInterrupt:
        click.echo("stopping…", err=True)
    finally:
        for q in queries:
            if q.isActive:
                q.stop()
        errors = [q.exception() for q in queries if q.exception() is not None]
        if own:
            spark.stop()
    if errors:
        raise click.ClickException(f"{name} failed: {errors[0]}")
    click.echo(f"{name}: done", err=True)


@run.command("page-views")
@run_options
@click.option("--input", "input_topic", default="page-views", show_default=True)
@click.option("--output", "output_topic", default="page-views-per-minute", show_default=True)
@click.option(
    "--top-topic", default="page-views-top", show_default=True, help="Compacted topic of the top-N table."
)
@click.option("--top", "top_n", type=int, default=10, show_default=True)
@click.option("--window", default="1 minute", show_default=True)
@click.option("--watermark", default="1 minute", show_default=True)
def run_page_views(
    config, master, spark_conf, log_level, input_topic, output_topic, top_topic, top_n, window, watermark
):
    """Views per page per minute (event time, watermark) and a top-N pages table."""
    ensure_topics(
        config.bootstrap_servers,
        {output_topic: 3, top_topic: 1},
        configs={top_topic: {"cleanup.policy": "compact"}},
    )
    _run(
        "page-views",
        master,
        spark_conf,
        log_level,
        config,
        input_topic=input_topic,
        output_topic=output_topic,
        top_topic=top_topic,
        top_n=top_n,
        window=window,
        watermark=watermark,
    )


@run.command("offline-load")
@run_options
@click.option("-t", "--topic", "input_topic", required=True, help="The topic to export.")
@click.option(
    "-o", "--output", "output_path", required=True, help="Parquet table directory (partitioned by date)."
)
@click.option("--binary", is_flag=True, help="Keep key and value as bytes instead of UTF-8 strings.")
@click.option("--max-records-per-batch", type=int, default=None, help="Bound each micro-batch.")
@click.option(
    "--repeat", is_flag=True, help="Keep running with --trigger instead of stopping when caught up."
)
def run_offline_load(
    config, master, spark_conf, log_level, input_topic, output_path, binary, max_records_per_batch, repeat
):
    """Export the topic's new records to Parquet by date; each run resumes where the last stopped."""
    config.available_now = config.available_now or not repeat
    _run(
        "offline-load",
        master,
        spark_conf,
        log_level,
        config,
        input_topic=input_topic,
        output_path=output_path,
        binary=binary,
        max_records_per_batch=max_records_per_batch,
    )


@run.command("value-length")
@run_options
@click.option("--input", "input_topic", default="my-input-topic", show_default=True)
@click.option("--output", "output_topic", default="my-output-topic", show_default=True)
def run_value_length(config, master, spark_conf, log_level, input_topic, output_topic):
    """mapValues(value -> value.length()) from INPUT to OUTPUT, exactly once."""
    with_partitions = _partitions(config.bootstrap_servers, input_topic)
    ensure_topics(config.bootstrap_servers, {output_topic: with_partitions})
    _run(
        "value-length",
        master,
        spark_conf,
        log_level,
        config,
        input_topic=input_topic,
        output_topic=output_topic,
    )


def _partitions(bootstrap_servers: str, topic: str) -> int:
    from odradek.pipeline.wire import Cluster

    with Cluster(bootstrap_servers) as cluster:
        return len(cluster.topic_partitions([topic], refresh=True).get(topic, [0]))


@pipeline.command("list")
def list_pipelines():
    """The pipelines `run` knows."""
    for name, module in PIPELINES.items():
        doc = (sys.modules.get(module) or importlib.import_module(module)).__doc__ or ""
        click.echo(f"{name:14} {doc.strip().splitlines()[0]}")
