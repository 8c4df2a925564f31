"""``odradek log-dirs``: each broker's log dirs and the partitions in them (kafka-log-dirs.sh)."""

from __future__ import annotations

import click

from odradek.cli.common import client_command


def _names(value: str | None) -> list[str] | None:
    return None if value is None else [v.strip() for v in value.split(",") if v.strip()]


@click.group(name="log-dirs", context_settings={"help_option_names": ["-h", "--help"]})
def log_dirs():
    """The brokers' log dirs (log.dirs) and the partition replicas in each (kafka-log-dirs.sh).

    Move a replica to another dir of its broker with the AlterReplicaLogDirs admin API
    (e.g. kafka-python's ``KafkaAdminClient.alter_replica_log_dirs``).

    \b
    Examples:
      odradek log-dirs describe
      odradek log-dirs describe --broker-list 0 --topic-list orders
    """


@log_dirs.command()
@click.option("--topic-list", metavar="T1,T2", help="Only these topics (default: all).")
@click.option("--broker-list", metavar="ID1,ID2", help="Only these brokers (default: all).")
@client_command
def describe(session, topic_list, broker_list):
    """Show each log dir: its size, errors, and each partition's size and lag.

    A partition being moved between dirs appears twice: its current log, and its future
    log in the destination dir (FUTURE yes) with how far behind it still is. An offline
    dir (its disk failed) shows KAFKA_STORAGE_ERROR.

    \b
    Examples:
      odradek log-dirs describe
      odradek log-dirs describe --topic-list orders,payments -o json
    """
    from odradek.protocol.errors import ErrorCode

    brokers = _names(broker_list)
    try:
        broker_ids = None if brokers is None else [int(b) for b in brokers]
    except ValueError:
        raise click.UsageError(f"--broker-list takes broker ids (numbers), got {broker_list!r}") from None
    with session.admin() as admin:
        described = admin.describe_log_dirs(topics=_names(topic_list), brokers=broker_ids)
    if session.json:  # the shape kafka-log-dirs.sh prints
        session.print_json(
            {
                "version": 1,
                "brokers": [
                    {
                        "broker": node,
                        "logDirs": [
                            {
                                "logDir": d.path,
                                "error": ErrorCode(d.error_code).name.upper() if d.error_code else None,
                                "partitions": [
                                    {
                                        "partition": f"{r.topic}-{r.partition}",
                                        "size": r.size,
                                        "offsetLag": r.offset_lag,
                                        "isFuture": r.is_future,
                                    }
                                    for r in d.replicas
                                ],
                            }
                            for d in dirs
                        ],
                    }
                    for node, dirs in sorted(described.items())
                ],
            }
        )
        return
    rows = []
    for node, dirs in sorted(described.items()):
        for d in dirs:
            error = ErrorCode(d.error_code).name.upper() if d.error_code else ""
            if not d.replicas:
                rows.append([node, d.path, error, "", "", "", ""])
            for r in sorted(d.replicas):
                rows.append(
                    [
                        node,
                        d.path,
                        error,
                        f"{r.topic}-{r.partition}",
                        r.size,
                        r.offset_lag,
                        "yes" if r.is_future else "",
                    ]
                )
    session.table(["BROKER", "LOG-DIR", "ERROR", "PARTITION", "SIZE", "LAG", "FUTURE"], rows)
