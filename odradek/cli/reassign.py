"""``odradek reassign``: move partitions between brokers (kafka-reassign-partitions.sh).

The plan is Kafka's JSON, so plans move between the two tools unchanged:
``{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2]}]}``.
``generate`` proposes one (Kafka's rack-aware placement over the brokers you name),
``execute`` starts it (AlterPartitionReassignments, KIP-455; the controller moves leadership
into the new replicas once they are in sync), ``verify`` says which moves are done,
``cancel`` stops the ones still running, ``list`` shows what is moving now.

``execute --throttle BYTES_PER_SEC`` limits the replication traffic of the moves, as
kafka-reassign-partitions does: ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate`` on every broker a moving partition has or will have,
``leader.replication.throttled.replicas`` (the current replicas, which may lead) and
``follower.replication.throttled.replicas`` (the new ones) on the moving topics. ``verify``
removes them all once every move of the plan is completed (unless ``--preserve-throttles``).
"""

from __future__ import annotations

import json
import random

import click

from odradek.cli.common import CliError, client_command


def _read_plan(path: str) -> dict[tuple[str, int], list[int]]:
    try:
        with open(path) as f:
            data = json.load(f)
        return {(p["topic"], int(p["partition"])): [int(r) for r in p["replicas"]] for p in data["partitions"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CliError(
            f"cannot read the reassignment plan {path}: {exc}",
            'expected {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}, as generate writes',
        ) from None


def _plan_json(assignment: dict[tuple[str, int], list[int]]) -> str:
    partitions = [{"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)} for (t, p), r in sorted(assignment.items())]
    return json.dumps({"version": 1, "partitions": partitions})


def _current(admin, topics) -> dict[tuple[str, int], list[int]]:
    described = admin.describe_topics(list(topics))
    return {(t, p.partition): list(p.replicas) for t, d in described.items() for p in d.partitions}


@click.group()
def reassign():
    """Move partitions between brokers (like kafka-reassign-partitions).

    \b
    Examples:
      odradek reassign generate --topics orders,payments --brokers 1,2,3 > plan.json
      odradek reassign execute plan.json      (prints the current assignment: keep it to roll back)
      odradek reassign verify plan.json       (until every move is completed)
    """


@reassign.command()
@click.option("--topics", required=True, help="Comma-separated topics to move.")
@click.option("--brokers", "broker_list", required=True, help="Comma-separated broker ids to place them on.")
@click.option("--disable-rack-aware", is_flag=True, help="Ignore broker.rack when placing replicas.")
@client_command
def generate(session, topics, broker_list, disable_rack_aware):
    """Print a plan placing TOPICS' partitions on BROKERS (same replication factor).

    The current assignment goes to stderr, the proposed plan (Kafka's JSON) to stdout.

    \b
    Examples:
      odradek reassign generate --topics orders --brokers 1,2,3 > plan.json
      odradek reassign generate --topics a,b --brokers 2,3 --disable-rack-aware
    """
    from odradek.cluster.assignment import RackAwareMode, assign_replicas, brokers_for_assignment
    from odradek.protocol import errors

    names = [t.strip() for t in topics.split(",") if t.strip()]
    try:
        wanted = [int(b) for b in broker_list.split(",") if b.strip()]
    except ValueError:
        raise CliError(f"--brokers {broker_list!r} is not a list of broker ids", "e.g. --brokers 1,2,3") from None
    with session.admin() as admin:
        racks = {b.node_id: b.rack for b in admin.describe_cluster().brokers}
        current = _current(admin, names)
    unknown = sorted(set(wanted) - set(racks))
    if unknown:
        raise CliError(f"brokers {unknown} are not in the cluster (it has {sorted(racks)})", "name live brokers in --brokers")
    mode = RackAwareMode.DISABLED if disable_rack_aware else RackAwareMode.ENFORCED
    placement = brokers_for_assignment({b: racks[b] for b in wanted}, mode)
    proposed = {}
    for name in names:
        parts = sorted(p for (t, p) in current if t == name)
        if not parts:
            raise CliError(f"topic {name!r} does not exist", "check the name with: odradek topics list")
        rf = len(current[(name, parts[0])])
        try:
            layout = assign_replicas(placement, len(parts), rf, rng=random.Random())
        except errors.KafkaError as exc:
            raise CliError(f"cannot place {name}: {exc.message}", "name more brokers, or use --disable-rack-aware") from None
        proposed.update({(name, p): layout[p] for p in parts})
    click.echo("Current partition replica assignment", err=True)
    click.echo(_plan_json(current), err=True)
    click.echo("Proposed partition reassignment configuration", err=True)
    click.echo(_plan_json(proposed))


BROKER_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
TOPIC_THROTTLES = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def _throttles(current, wanted):
    """Kafka's throttles for moving from ``current`` to ``wanted``: per topic, the
    leader-side (every current replica of a moving partition may be its leader) and
    follower-side (the replicas being added) ``partition:broker`` lists; and the brokers
    involved."""
    topics: dict[str, tuple[list[str], list[str]]] = {}
    brokers: set[int] = set()
    for (topic, p), target in sorted(wanted.items()):
        now = current.get((topic, p), [])
        if now == target:
            continue
        leaders, followers = topics.setdefault(topic, ([], []))
        leaders.extend(f"{p}:{b}" for b in now)
        followers.extend(f"{p}:{b}" for b in target if b not in now)
        brokers.update(now, target)
    return topics, brokers


def _set_throttles(admin, current, wanted, rate: int) -> None:
    from odradek.client.structs import ConfigResource

    topics, brokers = _throttles(current, wanted)
    if not topics:
        return
    admin.incremental_alter_configs(
        {
            ConfigResource("topic", t): {TOPIC_THROTTLES[0]: ",".join(lead), TOPIC_THROTTLES[1]: ",".join(follow)}
            for t, (lead, follow) in topics.items()
        }
    )
    admin.incremental_alter_configs({ConfigResource("broker", str(b)): dict.fromkeys(BROKER_RATES, rate) for b in sorted(brokers)})
    click.echo(
        f"The inter-broker throttle limit was set to {rate} B/s on brokers {','.join(map(str, sorted(brokers)))}; "
        "run verify until every move is completed, which removes it",
        err=True,
    )


def _clear_throttles(admin, topics) -> None:
    """Kafka's clean-up after a completed reassignment: the rates on every broker, the
    throttled-replicas lists on the plan's topics."""
    from odradek.client.structs import ConfigResource

    brokers = sorted(b.node_id for b in admin.describe_cluster().brokers)
    admin.incremental_alter_configs({ConfigResource("broker", str(b)): dict.fromkeys(BROKER_RATES) for b in brokers})
    admin.incremental_alter_configs({ConfigResource("topic", t): dict.fromkeys(TOPIC_THROTTLES) for t in sorted(topics)})
    click.echo(
        f"Cleared the replication throttles on brokers {','.join(map(str, brokers))} and topics {','.join(sorted(topics))}",
        err=True,
    )


@reassign.command()
@click.argument("plan", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--throttle",
    type=click.IntRange(min=1),
    default=None,
    metavar="BYTES_PER_SEC",
    help="Limit the replication of the moves to this many bytes/s per broker (removed by verify).",
)
@client_command
def execute(session, plan, throttle):
    """Start the moves of PLAN (Kafka's reassignment JSON).

    With --throttle, data moves at most that fast in and out of each broker involved, so
    clients keep their bandwidth; run verify until it says completed to remove the throttle.

    \b
    Examples:
      odradek reassign execute plan.json > rollback.json
      odradek reassign execute plan.json --throttle 50000000   (50 MB/s)
    """
    from odradek.client.structs import TopicPartition

    wanted = _read_plan(plan)
    with session.admin() as admin:
        current = _current(admin, {t for t, _ in wanted})
        if throttle is not None:
            _set_throttles(admin, current, wanted, throttle)
        results = admin.alter_partition_reassignments({TopicPartition(t, p): r for (t, p), r in wanted.items()})
    click.echo("Current partition replica assignment (save it to roll back):")
    click.echo(_plan_json({k: v for k, v in current.items() if k in wanted}))
    failed = {tp: exc for tp, exc in results.items() if exc is not None}
    for tp, exc in sorted(failed.items()):
        click.echo(f"Reassignment of {tp.topic}-{tp.partition} refused: {exc}", err=True)
    if failed:
        raise CliError(f"{len(failed)} of {len(wanted)} moves were refused", "fix the plan and run execute again")
    click.echo(f"Started the reassignment of {len(wanted)} partitions; check with: odradek reassign verify {plan}")


@reassign.command()
@click.argument("plan", type=click.Path(exists=True, dir_okay=False))
@click.option("--preserve-throttles", is_flag=True, help="Keep the replication throttles when every move is completed.")
@client_command
def verify(session, plan, preserve_throttles):
    """Say which moves of PLAN are completed, still in progress, or did not happen (exit code 1
    until every move is completed). Once all are completed, the throttles of execute
    --throttle are removed.

    \b
    Examples:
      odradek reassign verify plan.json
      until odradek reassign verify plan.json; do sleep 5; done
    """
    wanted = _read_plan(plan)
    with session.admin() as admin:
        moving = admin.list_partition_reassignments()
        current = _current(admin, {t for t, _ in wanted})
        done = not any((tp.topic, tp.partition) in wanted for tp in moving) and all(
            current.get(k) == r for k, r in wanted.items()
        )
        if done and not preserve_throttles:
            _clear_throttles(admin, {t for t, _ in wanted})
    rows, pending = [], 0
    for (t, p), replicas in sorted(wanted.items()):
        if (t, p) in moving:
            status, pending = "in progress", pending + 1
        elif current.get((t, p)) == replicas:
            status = "completed"
        else:
            status, pending = f"not done (replicas are {current.get((t, p))})", pending + 1
        rows.append([f"{t}-{p}", ",".join(map(str, replicas)), status])
    if session.json:
        session.print_json([{"partition": r[0], "replicas": r[1], "status": r[2]} for r in rows])
    else:
        session.table(["PARTITION", "TARGET", "STATUS"], rows)
    if pending:
        raise SystemExit(1)


@reassign.command()
@click.argument("plan", type=click.Path(exists=True, dir_okay=False))
@client_command
def cancel(session, plan):
    """Cancel the moves of PLAN that are still running (replicas go back to where they were).

    \b
    Examples:
      odradek reassign cancel plan.json
    """
    from odradek.client.structs import TopicPartition

    wanted = _read_plan(plan)
    with session.admin() as admin:
        results = admin.alter_partition_reassignments({TopicPartition(t, p): None for (t, p) in wanted})
    for tp, exc in sorted(results.items()):
        click.echo(f"{tp.topic}-{tp.partition}: {'cancelled' if exc is None else exc}")


@reassign.command("list")
@client_command
def list_(session):
    """The reassignments in progress, with the replicas being added and removed.

    \b
    Examples:
      odradek reassign list
      odradek reassign list -o json
    """
    with session.admin() as admin:
        moving = admin.list_partition_reassignments()
    rows = [
        [f"{tp.topic}-{tp.partition}", ",".join(map(str, r)), ",".join(map(str, a)), ",".join(map(str, d))]
        for tp, (r, a, d) in sorted(moving.items())
    ]
    if session.json:
        session.print_json([dict(zip(["partition", "replicas", "adding", "removing"], r, strict=True)) for r in rows])
    else:
        session.table(["PARTITION", "REPLICAS", "ADDING", "REMOVING"], rows)
