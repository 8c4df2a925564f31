"""The worker's metrics in Prometheus' text format, named as the JMX exporter names Kafka Connect's.

Read from the worker's state at each scrape (no counters of its own besides the worker's):
connector and task status (one gauge per state, 1 for the current one), records polled/put
per task, offset commit successes and failures, dead letter queue and error counts; in
distributed mode the group's (``connect-worker-rebalance-metrics``: the leader's URL as the
``leader_name`` label, the epoch, whether a rebalance is under way, rebalances completed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from odradek.connect.worker import Worker

STATES = ("UNASSIGNED", "RUNNING", "PAUSED", "STOPPED", "FAILED", "RESTARTING")


def _label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


class ConnectMetrics:
    def __init__(self, worker: Worker, rebalance: Callable[[], dict[str, Any] | None] = lambda: None):
        self.worker = worker
        self.rebalance = rebalance

    def render(self) -> str:
        w = self.worker
        lines = [
            "# TYPE kafka_connect_connect_worker_metrics_connector_count gauge",
            f"kafka_connect_connect_worker_metrics_connector_count {len(w.connectors)}",
            "# TYPE kafka_connect_connect_worker_metrics_task_count gauge",
            f"kafka_connect_connect_worker_metrics_task_count {len(w.tasks)}",
            "# TYPE kafka_connect_connector_metrics_status gauge",
        ]
        for name, state in sorted(w.connectors.items()):
            for s in STATES:
                lines.append(
                    f'kafka_connect_connector_metrics_status{{connector="{_label(name)}",type="{state.type}",'
                    f'status="{s.lower()}"}} {int(state.state == s)}'
                )
        lines.append("# TYPE kafka_connect_connector_task_metrics_status gauge")
        tasks = sorted(w.tasks.items())
        for (name, task_id), runner in tasks:
            for s in STATES:
                lines.append(
                    f'kafka_connect_connector_task_metrics_status{{connector="{_label(name)}",task="{task_id}",'
                    f'status="{s.lower()}"}} {int(runner.state == s)}'
                )
        lines.append("# TYPE kafka_connect_source_task_metrics_source_record_poll_total counter")
        lines.append("# TYPE kafka_connect_sink_task_metrics_sink_record_send_total counter")
        lines.append("# TYPE kafka_connect_task_error_metrics_total_record_errors counter")
        lines.append("# TYPE kafka_connect_task_error_metrics_deadletterqueue_produce_requests counter")
        for (name, task_id), runner in tasks:
            labels = f'connector="{_label(name)}",task="{task_id}"'
            kind = "sink" if hasattr(runner, "deliver") else "source"
            metric = "sink_record_send_total" if kind == "sink" else "source_record_poll_total"
            lines.append(f"kafka_connect_{kind}_task_metrics_{metric}{{{labels}}} {runner.records}")
            errors = getattr(runner.plumbing, "errors", None)
            if errors is not None:
                lines.append(f"kafka_connect_task_error_metrics_total_record_errors{{{labels}}} {errors.total_errors}")
                lines.append(
                    f"kafka_connect_task_error_metrics_deadletterqueue_produce_requests{{{labels}}} {errors.dlq_records}"
                )
        lines += [
            "# TYPE kafka_connect_connect_worker_metrics_offset_commit_completion_total counter",
            f"kafka_connect_connect_worker_metrics_offset_commit_completion_total {w.commits['success']}",
            "# TYPE kafka_connect_connect_worker_metrics_offset_commit_skip_total counter",
            f"kafka_connect_connect_worker_metrics_offset_commit_skip_total {w.commits['failure']}",
        ]
        group = self.rebalance()
        if group is not None:
            prefix = "kafka_connect_connect_worker_rebalance_metrics"
            lines += [
                f"# TYPE {prefix}_leader_name gauge",
                f'{prefix}_leader_name{{leader_name="{_label(group["leader_name"])}"}} 1',
            ]
            for key in ("epoch", "rebalancing", "completed_rebalances_total"):
                lines += [f"# TYPE {prefix}_{key} {'counter' if key.endswith('total') else 'gauge'}",
                          f"{prefix}_{key} {int(group[key])}"]
        return "\n".join(lines) + "\n"
