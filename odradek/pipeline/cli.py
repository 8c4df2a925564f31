"""``odradek pipeline``: run the Spark pipelines and feed them.

    odradek pipeline generate page-views --rate 200      # in one terminal
    odradek pipeline run page-views --checkpoint ./ckpt  # in another, side by side
    odradek pipeline run offline-load --topic page-views --output ./warehouse/page-views
    odradek pipeline run value-length --input my-input-topic --output my-output-topic

Pipelines run on a local Spark (``local[*]``) unless ``--master`` names a cluster; they
need PySpark (``pip install odradek[spark]``) and Java 17 or newer. Streaming pipelines
run until Ctrl-C, which stops them after the current micro-batch (``supervise.py``);
``--available-now`` processes what is in the topics now and stops.
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import click

from odradek.pipeline.pipelines import PIPELINES

log = logging.getLogger(__name__)

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
EXIT_INTERRUPTED = 130


def bootstrap_option(fn):
    """``--bootstrap-server``/``-b`` as every odradek command spells it (and the env var);
    the plural ``--bootstrap-servers`` of earlier versions still works, unlisted."""

    @click.option(
        "-b",
        "--bootstrap-server",
        "bootstrap_server",
        envvar="ODRADEK_BOOTSTRAP_SERVER",
        default=DEFAULT_BOOTSTRAP,
        show_default=True,
        metavar="HOST:PORT",
        help="Broker(s) to connect to, comma-separated. Env: ODRADEK_BOOTSTRAP_SERVER.",
    )
    @click.option("--bootstrap-servers", "bootstrap_servers_alias", hidden=True, metavar="HOST:PORT")
    @functools.wraps(fn)
    def wrapper(bootstrap_server, bootstrap_servers_alias, **kwargs):
        return fn(bootstrap_servers=bootstrap_servers_alias or bootstrap_server, **kwargs)

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
def pipeline():
    """Spark pipelines over Odradek topics (PySpark data source "odradek")."""


# -- generate ------------------------------------------------------------------------------


@pipeline.group()
def generate():
    """Publish synthetic events for the pipelines."""


@generate.command("page-views")
@bootstrap_option
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
    """JSON page-view events, keyed by user, to TOPIC (created if missing).

    Runs side by side with `odradek pipeline run page-views`: start one in each terminal.

    \b
    Examples:
      odradek pipeline generate page-views --rate 200
      odradek pipeline generate page-views --count 10000 --rate 0 --seed 1
    """
    from odradek.pipeline.pipelines.page_view_events import generate as run_generate

    ensure_topics(bootstrap_servers, {topic: partitions})
    started = time.monotonic()

    last = [started]

    def progress(sent: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 5:
            last[0] = now
            click.echo(f"{sent} events sent", err=True)

    from odradek.pipeline.supervise import StopSignals

    with StopSignals() as signals:
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
            stop=signals.requested,
        )
    click.echo(f"sent {sent} page-view events to {topic} in {time.monotonic() - started:.1f}s")
    if signals.requested.is_set():
        sys.exit(EXIT_INTERRUPTED)


def ensure_topics(bootstrap_servers: str, topics: dict[str, int], configs: dict | None = None) -> None:
    """Create the topics that do not exist yet (with this many partitions)."""
    from odradek.pipeline.blocking_client import Cluster

    with Cluster(bootstrap_servers) as cluster:
        existing = cluster.topic_partitions(list(topics), refresh=True)
        for name, partitions in topics.items():
            if name not in existing:
                cluster.create_topic(name, partitions, configs=(configs or {}).get(name))


# -- run -----------------------------------------------------------------------------------


@pipeline.group()
def run():
    """Run a pipeline (NAME: page-views, page-views-by-region, offline-load, value-length).

    A streaming pipeline shows the rows it has processed while it runs. Ctrl-C (or
    SIGTERM) stops it after the current micro-batch and prints a summary (exit status
    130); a second Ctrl-C stops at once. The next run resumes from the checkpoint. When
    one query of a pipeline fails, the others are stopped at once and the command exits 1
    with one line naming the query and the cause; Spark's log goes to a file it names.
    """


def run_options(fn):
    @bootstrap_option
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
    @click.option(
        "--log-level",
        default="WARN",
        show_default=True,
        help="Level of Spark's log, which goes to a file the command names when it starts.",
    )
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
        from odradek.pipeline.pipelines.run_config import RunConfig

        problem = java_problem()
        if problem:
            raise click.ClickException(problem)

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


def java_problem() -> str | None:
    """Why Spark cannot start here (no Java 17+), in one line; None when it can."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    where = f"JAVA_HOME ({java_home})" if java_home else "PATH"
    fix = "install one (on Debian: apt-get install openjdk-17-jre-headless) or point JAVA_HOME at one"
    if not java or not os.access(java, os.X_OK):
        return f"Spark needs Java 17 or newer and there is no java in {where}: {fix}"
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"Spark needs Java 17 or newer and {java} -version failed ({exc}): {fix}"
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    major = int(match.group(1)) if match else 0
    if major == 1 and match.group(2):  # "1.8.0_392" is Java 8
        major = int(match.group(2))
    if major < 17:
        return f"Spark needs Java 17 or newer and {java} is Java {major or '(unknown version)'}: {fix}"
    return None


_LOG4J2 = """\
# Spark's log for one `odradek pipeline run`, written by the command: the terminal shows
# the pipeline's progress and, when a query fails, one line naming it and the cause.
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
"""


def spark_log_settings(name: str, log_level: str, spark_conf: dict) -> tuple[str, dict]:
    """Where Spark's log of this run goes (a file, not the terminal, so that a failed task's
    Java stack traces do not bury the one line that says what failed), and the Spark
    configuration that sends it there: a log4j2 configuration file next to it."""
    directory = tempfile.mkdtemp(prefix=f"odradek-pipeline-{name}-")
    path = os.path.join(directory, "spark.log")
    config = os.path.join(directory, "log4j2.properties")
    with open(config, "w", encoding="utf-8") as f:
        f.write(_LOG4J2.format(level=log_level.lower(), path=path))
    option = f"-Dlog4j2.configurationFile=file:{config}"
    extra = spark_conf.get("spark.driver.extraJavaOptions")
    return path, {"spark.driver.extraJavaOptions": f"{extra} {option}" if extra else option}


def _session(master: str, spark_conf: dict, log_level: str, name: str):
    """A session for the run, whether this command made it (and so must stop it), and the
    file Spark logs to (None for a session that was already there)."""
    try:
        from pyspark.sql import SparkSession

        from odradek.pipeline import register, spark_session
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise click.ClickException(f"pipelines need PySpark: pip install 'odradek[spark]' ({exc})") from None
    active = SparkSession.getActiveSession()
    if active is not None:  # called from a program that already has one (tests, notebooks)
        register(active)
        return active, False, None
    log_path, log_conf = spark_log_settings(name, log_level, spark_conf)
    # Spark's console progress bar would fight with the live line of rows processed.
    conf = {"spark.ui.showConsoleProgress": "false", **spark_conf, **log_conf}
    spark = spark_session(master, app_name=f"odradek-{name}", config=conf, own_process_group=True)
    spark.sparkContext.setLogLevel(log_level.upper())
    return spark, True, log_path


def _run(
    name: str,
    master: str,
    spark_conf: dict,
    log_level: str,
    config,
    output: str | None = None,
    note: str | None = None,
    **kwargs,
) -> None:
    from odradek.pipeline.supervise import supervise

    spark, own, log_path = _session(master, spark_conf, log_level, name)
    try:
        module = importlib.import_module(PIPELINES[name])
        queries = module.start(spark, config, **kwargs)
        names = ", ".join(q.name or str(q.id) for q in queries)
        until = "processes what is there now" if config.available_now else "runs until Ctrl-C"
        logs = f"; Spark logs to {log_path}" if log_path else ""
        click.echo(f"{name}: started {names}; {until}{logs}", err=True)
        if note and not config.available_now:
            click.echo(f"{name}: {note}", err=True)
        summary = supervise(spark, name, queries)
    finally:
        if own:
            spark.sparkContext.setLogLevel("ERROR")  # a stopping session logs warnings
            spark.stop()
    if summary.errors:
        where = f" (details in {log_path})" if log_path else ""
        others = "; the other queries were stopped" if len(summary.queries) > 1 else ""
        raise click.ClickException(f"{name} failed: query {'; query '.join(summary.errors)}{others}{where}")
    click.echo(summary.text() + (f"; output in {output}" if output else ""))
    if summary.interrupted:
        sys.exit(EXIT_INTERRUPTED)


@run.command("page-views")
@run_options
@click.option("--input", "input_topic", default="page-views", show_default=True, help="The page-view events.")
@click.option(
    "--output",
    "output_topic",
    default="page-views-per-minute",
    show_default=True,
    help="Views per page per window, keyed by page, one record per window.",
)
@click.option(
    "--top-topic", default="page-views-top", show_default=True, help="Compacted topic of the top-N table."
)
@click.option("--top", "top_n", type=click.IntRange(min=1), default=10, show_default=True, help="N of the top N.")
@click.option(
    "--window", default="1 minute", show_default=True, help="Window size (TimeWindows), e.g. '10 seconds'."
)
@click.option(
    "--grace",
    "--watermark",
    "grace",
    default="1 minute",
    show_default=True,
    help="How late (in event time) an event may come and still count in its window: Kafka "
    "Streams' grace period (--watermark is its old name).",
)
def run_page_views(
    config, master, spark_conf, log_level, input_topic, output_topic, top_topic, top_n, window, grace
):
    """Views per page per minute (event time, with a grace period) and a top-N pages table.

    A Kafka Streams topology (odradek/streams/apps/page_views.py) run by Spark, exactly once.
    Feed it with `odradek pipeline generate page-views` running side by side (another
    terminal). The event time is each event's `ts`. A window's count reaches --output once,
    when stream time (the newest event time seen) has passed the window's end plus --grace
    (events two minutes newer than the window's start, with the defaults): until then
    --output stays empty. The all-time top N reaches --top-topic, keyed by rank ("001", ...),
    whenever the counts change.

    --checkpoint is Kafka Streams' state.dir: the app's checkpoints are in
    CHECKPOINT/page-views/page-views-INPUT-OUTPUT/, its application.id (also the prefix of its
    internal topics: the changelogs and repartition topics `odradek topics list` shows).
    --trigger is its commit interval; --starting-offsets its auto.offset.reset (earliest or
    latest).

    \b
    Examples:
      odradek pipeline run page-views
      odradek pipeline run page-views --window '10 seconds' --grace '5 seconds' --trigger '2 seconds'
    """
    from odradek.pipeline.pipelines.run_config import interval_ms

    for name, value in (("--window", window), ("--grace", grace)):
        try:
            interval_ms(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint=name) from None
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
        output=f"{output_topic} and {top_topic}",
        note=f"the top pages reach {top_topic} as the counts change; a window's count reaches "
        f"{output_topic} once events {window} + {grace} newer than its start have arrived. "
        f"Feed {input_topic} with `odradek pipeline generate page-views`, side by side.",
        input_topic=input_topic,
        output_topic=output_topic,
        top_topic=top_topic,
        top_n=top_n,
        window=window,
        grace=grace,
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
    """Export the topic's new records to Parquet by date; each run resumes where the last stopped.

    \b
    Examples:
      odradek pipeline run offline-load -t page-views -o ./warehouse/page-views
    """
    config.available_now = config.available_now or not repeat
    _run(
        "offline-load",
        master,
        spark_conf,
        log_level,
        config,
        output=output_path,
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
    """mapValues(value -> value.length()) from INPUT to OUTPUT, exactly once.

    \b
    Examples:
      odradek pipeline run value-length --input my-input-topic --output my-output-topic
    """
    with_partitions = _partitions(config.bootstrap_servers, input_topic)
    ensure_topics(config.bootstrap_servers, {output_topic: with_partitions})
    _run(
        "value-length",
        master,
        spark_conf,
        log_level,
        config,
        input_topic=input_topic,
        output=output_topic,
        output_topic=output_topic,
    )


@run.command("page-views-by-region")
@run_options
@click.option("--views", "views_topic", default="page-views", show_default=True, help="user -> page records.")
@click.option("--regions", "regions_topic", default="user-regions", show_default=True, help="user -> region table.")
@click.option("--output", "output_topic", default="page-views-by-region", show_default=True)
def run_page_views_by_region(config, master, spark_conf, log_level, views_topic, regions_topic, output_topic):
    """Page views counted by the viewer's region (a Kafka Streams topology: a stream-table join).

    Each record of --views (key: user) counts for the user's region in --regions (key: user,
    value: region; the latest value wins, a null deletes) as it is at the view's time. The
    counts reach --output keyed by region, as 8-byte longs
    (`odradek consume page-views-by-region --value-deserializer long`). Exactly once.

    \b
    Examples:
      odradek pipeline run page-views-by-region --views page-views --regions user-regions
    """
    with_partitions = _partitions(config.bootstrap_servers, views_topic)
    ensure_topics(config.bootstrap_servers, {output_topic: with_partitions})
    _run(
        "page-views-by-region",
        master,
        spark_conf,
        log_level,
        config,
        output=output_topic,
        views_topic=views_topic,
        regions_topic=regions_topic,
        output_topic=output_topic,
    )


def _partitions(bootstrap_servers: str, topic: str) -> int:
    from odradek.pipeline.blocking_client import Cluster

    with Cluster(bootstrap_servers) as cluster:
        return len(cluster.topic_partitions([topic], refresh=True).get(topic, [0]))


@pipeline.command("list")
def list_pipelines():
    """The pipelines `run` knows."""
    for name, module in PIPELINES.items():
        doc = (sys.modules.get(module) or importlib.import_module(module)).__doc__ or ""
        click.echo(f"{name:14} {doc.strip().splitlines()[0]}")
