"""The processes of ``odradek cluster up``: one ZooKeeper and N brokers, watched until Ctrl-C.

A broker that exits is reported in one line (how it ended, where its log is) and the others
keep running, so a local cluster is a place to try failover. It starts again on request
(``odradek cluster restart-broker N``, through cli/cluster_control.py) or by itself under a
restart policy (``--restart on-failure --restart-delay 2s``). Before a broker starts, the
registration its killed predecessor left in ZooKeeper is cleared (cluster/stale_registrations.py):
``cluster up`` owns that ZooKeeper and knows the process is gone, so nobody waits for the old
session to expire. Everything here runs on the main thread.
"""

from __future__ import annotations

import asyncio
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

import click

from odradek.cluster.stale_registrations import clear_stale_registrations
from odradek.cluster.zk_client import ZooKeeperError
from odradek.testing.process import BrokerProcess
from odradek.testing.zookeeper import ZooKeeperServer

RESTART_POLICIES = ("never", "on-failure", "always")
# A broker that exits again within this long of a restart doubles the next delay (to a cap),
# so a broker that cannot start does not spin.
QUICK_FAILURE_S = 30.0
MAX_RESTART_DELAY_S = 60.0
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0  # a controlled shutdown on a busy machine, before SIGKILL


@dataclass
class RestartPolicy:
    mode: str = "never"
    delay_s: float = 2.0

    def wants_restart(self, exit_code: int) -> bool:
        return self.mode == "always" or (self.mode == "on-failure" and exit_code != 0)


def describe_exit(code: int) -> str:
    """``killed by SIGKILL`` or ``exit code 1``"""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


@dataclass
class _Watch:
    """What the supervisor knows about one broker beyond its process."""

    reported_exit: bool = False
    restart_due: float | None = None  # monotonic time of a scheduled restart
    restarted_at: float = float("-inf")  # an exit soon after a restart doubles the next delay
    delay_s: float = 0.0


@dataclass
class LocalCluster:
    root: Path
    zookeeper: ZooKeeperServer
    brokers: dict[int, BrokerProcess]
    policy: RestartPolicy
    start_timeout_s: float = 60.0
    _watch: dict[int, _Watch] = field(default_factory=dict)
    _zookeeper_exit_reported: bool = False

    @property
    def zookeeper_connect(self) -> str:
        return f"{self.zookeeper.connect_string}/odradek"

    def running(self) -> list[BrokerProcess]:
        return [b for b in self.brokers.values() if b.proc is not None and b.proc.poll() is None]

    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers.values())

    # -- start ---------------------------------------------------------------------------------

    def start_brokers(self) -> None:
        """Clear what an earlier run left registered (no broker of ours runs yet, and this
        ZooKeeper is ours), then start every broker; ClickException naming the one that failed."""
        self._clear_stale(None, "left by an earlier run")
        for node_id, broker in self.brokers.items():
            try:
                broker.start(self.start_timeout_s)
            except (RuntimeError, TimeoutError) as exc:
                raise click.ClickException(f"broker {node_id} did not start: {exc}\n{_log_tail(broker)}") from None
            self._watch[node_id] = _Watch(delay_s=self.policy.delay_s)

    def wait_until_formed(self) -> None:
        """Until one broker lists them all and names a controller (the controller has told it)."""
        from odradek.client.blocking import Admin

        deadline = time.monotonic() + READY_TIMEOUT_S
        last: object = None
        with Admin({"bootstrap.servers": self.bootstrap_servers(), "request.timeout.ms": 3000}) as admin:
            while time.monotonic() < deadline:
                try:
                    desc = admin.describe_cluster()
                    last = sorted(b.node_id for b in desc.brokers)
                    if last == sorted(self.brokers) and desc.controller_id in self.brokers:
                        return
                except Exception as exc:  # a broker still starting: ask again
                    last = exc
                time.sleep(0.2)
        raise click.ClickException(
            f"the brokers did not form a cluster within {READY_TIMEOUT_S:.0f} s (last seen: {last}); see the logs in {self.root}"
        )

    # -- watching --------------------------------------------------------------------------------

    def check(self) -> None:
        """Report brokers that exited since the last check; run restarts that are due."""
        now = time.monotonic()
        if not self.zookeeper.running and not self._zookeeper_exit_reported:
            self._zookeeper_exit_reported = True
            click.echo(
                f"zookeeper exited ({describe_exit(self.zookeeper.proc.returncode)}); its log: {self.zookeeper.log_path}; "
                "the brokers serve with the metadata they have; Ctrl-C and run cluster up again to get it back",
                err=True,
            )
        for node_id, broker in self.brokers.items():
            watch = self._watch.setdefault(node_id, _Watch(delay_s=self.policy.delay_s))
            code = broker.proc.poll() if broker.proc is not None else None
            if code is not None and not watch.reported_exit:
                watch.reported_exit = True
                click.echo(self._exit_line(node_id, broker, code, watch, now), err=True)
            if watch.restart_due is not None and now >= watch.restart_due:
                watch.restart_due = None
                ok, message = self.restart(node_id)
                click.echo(message, err=not ok)

    def _exit_line(self, node_id: int, broker: BrokerProcess, code: int, watch: _Watch, now: float) -> str:
        line = f"broker {node_id} exited ({describe_exit(code)}); the others keep running; its log: {broker.log_path}; "
        if self.policy.wants_restart(code):
            if now - watch.restarted_at < QUICK_FAILURE_S:
                watch.delay_s = min(max(watch.delay_s * 2, self.policy.delay_s), MAX_RESTART_DELAY_S)
            else:
                watch.delay_s = self.policy.delay_s
            watch.restart_due = now + watch.delay_s
            return line + f"restarting it in {watch.delay_s:g} s (--restart {self.policy.mode})"
        return line + f"`odradek cluster restart-broker {node_id} --data-dir {self.root}` starts it again"

    def restart(self, node_id: int) -> tuple[bool, str]:
        """Start broker ``node_id`` again (stopping it cleanly first if it runs): (ok, one line)."""
        broker = self.brokers.get(node_id)
        if broker is None:
            return False, f"no broker {node_id} in this cluster (it has brokers {', '.join(map(str, self.brokers))})"
        watch = self._watch.setdefault(node_id, _Watch(delay_s=self.policy.delay_s))
        watch.restart_due = None
        stopped = ""
        if broker.proc is not None and broker.proc.poll() is None:
            code = broker.stop(STOP_TIMEOUT_S)
            stopped = f"stopped it ({describe_exit(code)}), "
        self._clear_stale([node_id], f"left by broker {node_id}'s earlier process")
        watch.reported_exit = False
        watch.restarted_at = time.monotonic()
        try:
            broker.start(self.start_timeout_s)
        except (RuntimeError, TimeoutError) as exc:
            # the exit is reported (and, under a policy, retried) by the next check
            return False, f"broker {node_id} did not start again: {exc}\n{_log_tail(broker)}"
        return True, f"broker {node_id}: {stopped}started again (pid {broker.proc.pid}) on {broker.bootstrap_servers}"

    def handle_request(self, request: dict) -> dict:
        """An answer to ``odradek cluster restart-broker`` (cli/cluster_control.py)."""
        if request.get("command") != "restart-broker" or not isinstance(request.get("broker"), int):
            return {"ok": False, "message": f"unknown request {request!r}"}
        ok, message = self.restart(request["broker"])
        click.echo(message, err=not ok)
        return {"ok": ok, "message": message}

    def _clear_stale(self, broker_ids: list[int] | None, whose: str) -> None:
        try:
            cleared = asyncio.run(clear_stale_registrations(self.zookeeper_connect, broker_ids))
        except ZooKeeperError as exc:  # the broker then waits its old session out itself
            click.echo(f"could not clear stale ZooKeeper registrations ({exc}); starting anyway", err=True)
            return
        if cleared:
            click.echo(f"cleared the stale ZooKeeper registration of {cleared.describe()}, {whose}")

    # -- stop ----------------------------------------------------------------------------------------

    def stop(self) -> None:
        """SIGTERM every running broker at once (each moves its leaderships away), then ZooKeeper."""
        from odradek.testing.embedded_cluster import stop_all

        running = self.running()
        codes = dict(zip((b.node_id for b in running), stop_all(running), strict=True))
        for node_id, broker in self.brokers.items():
            if broker.proc is None:
                continue
            code = codes.get(node_id, broker.proc.returncode)
            click.echo(f"broker {node_id} stopped ({describe_exit(code)})")
        if self.zookeeper.running:
            self.zookeeper.stop()
            click.echo("zookeeper stopped")


def _log_tail(broker: BrokerProcess, lines: int = 3) -> str:
    return "\n".join(broker.log_text().splitlines()[-lines:])
